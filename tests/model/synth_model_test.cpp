// `folio synth`'s models load and run: a tiny synth GGUF (written to disk, streamed) goes
// through the loader, the tokenizer and a CPU forward with finite logits.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_executor.h"
#include "kv/kv_cache_storage.h"
#include "model/gguf_file.h"
#include "model/gguf_tokenizer.h"
#include "model/model_weights.h"
#include "model/rope_scaling.h"
#include "model/synth_model.h"
#include "text/tokenizer.h"

namespace folio {
namespace {

TEST(SynthModel, TinyLoadsAndRunsWithFiniteLogits) {
  for (DType type : {DType::BF16, DType::Q8_0}) {
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("folio-synth-test-" + std::to_string(static_cast<int>(type)) + ".gguf"))
                                 .string();
    Expected<SynthConfig> config = synth_config("tiny");
    ASSERT_TRUE(config) << config.error();
    uint64_t last = 0, total = 0;
    Status s = write_synth_model(*config, SynthOptions{type, 3, 0}, path, [&](uint64_t done, uint64_t all) {
      EXPECT_GE(done, last);
      last = done;
      total = all;
    });
    ASSERT_TRUE(s) << s.message();
    EXPECT_EQ(last, total);

    Expected<GgufFile> file = GgufFile::open(path);
    ASSERT_TRUE(file) << file.error();
    Expected<std::unique_ptr<ModelWeights>> model = ModelWeights::load(*file);
    ASSERT_TRUE(model) << model.error();
    const ModelConfig& c = (*model)->config();
    EXPECT_EQ(c.num_layers, 2);
    EXPECT_EQ(c.vocab_size, 1024);
    EXPECT_EQ((*model)->rope_freq_factors().size(), static_cast<size_t>(c.head_dim / 2));
    Expected<Tokenizer> tokenizer = tokenizer_from_gguf(*file);
    ASSERT_TRUE(tokenizer) << tokenizer.error();
    const std::vector<int32_t> tokens = tokenizer->encode("the quick brown fox", false, false);
    ASSERT_FALSE(tokens.empty());
    EXPECT_EQ(tokenizer->decode(tokens, false), "the quick brown fox");

    cpu::CpuBackend backend(1);
    cpu::CpuExecutor executor(**model, backend, 4, 16, 0);
    ForwardBatch batch;
    std::vector<int32_t> table = {1, 2};
    for (int32_t i = 0; i < static_cast<int32_t>(tokens.size()); ++i) {
      batch.tokens.push_back(tokens[static_cast<size_t>(i)]);
      batch.positions.push_back(i);
      batch.slot_mapping.push_back(table[static_cast<size_t>(i / 16)] * 16 + i % 16);
    }
    batch.sequences.push_back({0, batch.num_tokens(), batch.num_tokens(), table});
    batch.logit_rows.push_back(batch.num_tokens() - 1);
    const StepResult result = executor.execute(batch, nullptr);
    ASSERT_EQ(result.logits.size(), static_cast<size_t>(c.vocab_size));
    for (float v : result.logits) ASSERT_TRUE(std::isfinite(v));
    std::filesystem::remove(path);
  }
}

// Every block type synth offers loads with the types asked for; the Q4_K_M mix puts attn_v,
// ffn_down and the output matrix in Q6_K; K-quants refuse widths that are not multiples of 256.
TEST(SynthModel, BlockTypesAndTheQ4KMMix) {
  const std::string path = (std::filesystem::temp_directory_path() / "folio-synth-types.gguf").string();
  Expected<SynthConfig> config = synth_config("tiny-k256");
  ASSERT_TRUE(config) << config.error();
  for (DType type : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    for (bool mix : {false, true}) {
      if (mix && type != DType::Q4_K) continue;
      Status s = write_synth_model(*config, SynthOptions{type, 3, 0, mix}, path);
      ASSERT_TRUE(s) << dtype_name(type) << ": " << s.message();
      Expected<GgufFile> file = GgufFile::open(path);
      ASSERT_TRUE(file) << file.error();
      Expected<std::unique_ptr<ModelWeights>> model = ModelWeights::load(*file);
      ASSERT_TRUE(model) << model.error();
      const LayerWeights& layer = (*model)->layers()[0];
      const DType mixed = mix ? DType::Q6_K : type;
      EXPECT_EQ(layer.q.type, type) << dtype_name(type);
      EXPECT_EQ(layer.gate.type, type) << dtype_name(type);
      EXPECT_EQ(layer.v.type, mixed) << dtype_name(type);
      EXPECT_EQ(layer.down.type, mixed) << dtype_name(type);
      EXPECT_EQ((*model)->output().type, mixed) << dtype_name(type);
    }
  }
  Status narrow = write_synth_model(synth_config("tiny").value(), SynthOptions{DType::Q6_K, 3, 0}, path);
  ASSERT_FALSE(narrow);
  EXPECT_NE(narrow.message().find("multiple of 256"), std::string::npos) << narrow.message();
  EXPECT_FALSE(write_synth_model(*config, SynthOptions{DType::Q8_0, 3, 0, true}, path));
  std::filesystem::remove(path);
}

TEST(SynthModel, Llama3RopeFactorsFollowTheScalingBands) {
  const std::vector<float> f = llama3_rope_freq_factors(128, 500000.0f);
  ASSERT_EQ(f.size(), 64u);
  EXPECT_FLOAT_EQ(f.front(), 1.0f);  // short wavelengths kept
  EXPECT_FLOAT_EQ(f.back(), 8.0f);   // long ones divided by the factor
}

TEST(SynthModel, UnknownConfigNamesTheKnownOnes) {
  Expected<SynthConfig> config = synth_config("gpt5");
  ASSERT_FALSE(config);
  EXPECT_NE(config.error().find("llama3-8b"), std::string::npos);
}

}  // namespace
}  // namespace folio
