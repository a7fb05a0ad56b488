// End to end against llama.cpp (through llama-cpp-python) on the same GGUF file: prompt
// tokenization, last-position logits and 64 greedy tokens for five prompts, and perplexity.
// The goldens come from scripts/make-model-goldens.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>

#include "backend/cpu/cpu_backend.h"
#include "engine/perplexity.h"
#include "engine/sequence_runner.h"
#include "model/llama_model.h"
#include "support/test_paths.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace folio {
namespace {

using testing::read_file;
using testing::source_dir;

class LlamaGolden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = testing::default_model_path();
    ASSERT_TRUE(std::filesystem::exists(path)) << testing::missing_model_message(path);
    Expected<GgufFile> opened = GgufFile::open(path);
    ASSERT_TRUE(opened) << opened.error();
    file_ = new GgufFile(std::move(opened).value());
    Expected<std::unique_ptr<LlamaModel>> model = LlamaModel::load(*file_);
    ASSERT_TRUE(model) << model.error();
    model_ = std::move(model).value().release();
    Expected<Tokenizer> tokenizer = Tokenizer::from_gguf(*file_);
    ASSERT_TRUE(tokenizer) << tokenizer.error();
    tokenizer_ = new Tokenizer(std::move(tokenizer).value());
    backend_ = new cpu::CpuBackend();
    goldens_ = new nlohmann::json(nlohmann::json::parse(
        read_file(source_dir() + "/tests/golden/model/smollm2_q4_1.json")));
  }
  static void TearDownTestSuite() {
    delete goldens_;
    delete backend_;
    delete tokenizer_;
    delete model_;
    delete file_;
  }

  static std::vector<float> golden_logits(const std::string& name) {
    const std::string bytes =
        read_file(source_dir() + "/tests/golden/model/smollm2_q4_1." + name + ".logits.f32");
    std::vector<float> logits(bytes.size() / sizeof(float));
    std::memcpy(logits.data(), bytes.data(), logits.size() * sizeof(float));
    return logits;
  }

  static std::vector<int32_t> top_ids(const std::vector<float>& logits, int k) {
    std::vector<int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    ids.resize(k);
    return ids;
  }

  static inline GgufFile* file_ = nullptr;
  static inline LlamaModel* model_ = nullptr;
  static inline Tokenizer* tokenizer_ = nullptr;
  static inline cpu::CpuBackend* backend_ = nullptr;
  static inline nlohmann::json* goldens_ = nullptr;
};

TEST_F(LlamaGolden, PromptTokensMatchReference) {
  for (const nlohmann::json& c : (*goldens_)["cases"]) {
    const std::string text = c["text"];
    const bool chat = c["chat"];
    const std::vector<int32_t> expected = c["prompt_ids"];
    const std::vector<int32_t> ids = tokenizer_->encode(text, /*add_special=*/!chat, /*parse_special=*/chat);
    EXPECT_EQ(ids, expected) << c["name"];
  }
}

TEST_F(LlamaGolden, ChatPromptRendersLikeReference) {
  const nlohmann::json* chat_case = nullptr;
  for (const nlohmann::json& c : (*goldens_)["cases"]) {
    if (c["chat"]) chat_case = &c;
  }
  ASSERT_NE(chat_case, nullptr);
  Expected<ChatTemplate> chat_template = ChatTemplate::parse(*file_->get_string("tokenizer.chat_template"));
  ASSERT_TRUE(chat_template) << chat_template.error();
  std::vector<ChatMessage> messages = {{"user", "What is the capital of France? Answer in one sentence."}};
  Expected<std::string> text = chat_template->render(messages, true, {{"bos_token", "<|im_start|>"}, {"eos_token", "<|im_end|>"}});
  ASSERT_TRUE(text) << text.error();
  EXPECT_EQ(*text, (*chat_case)["text"].get<std::string>());
}

TEST_F(LlamaGolden, LastLogitsAndGreedyContinuationMatchReference) {
  for (const nlohmann::json& c : (*goldens_)["cases"]) {
    const std::string name = c["name"];
    const std::vector<int32_t> prompt = c["prompt_ids"];
    const std::vector<int32_t> expected_generation = c["generated_ids"];
    SequenceRunner runner(*model_, *backend_, 2048);
    Expected<std::vector<float>> logits = runner.append(prompt);
    ASSERT_TRUE(logits) << logits.error();

    const std::vector<float> reference = golden_logits(name);
    ASSERT_EQ(reference.size(), logits->size());
    double max_abs = 0.0;
    for (size_t i = 0; i < reference.size(); ++i) {
      max_abs = std::max(max_abs, std::fabs(static_cast<double>((*logits)[i]) - reference[i]));
    }
    std::printf("[%s] %zu prompt tokens: last-position logits max |folio - llama.cpp| = %.4f\n",
                name.c_str(), prompt.size(), max_abs);
    EXPECT_LT(max_abs, 0.5) << name;
    EXPECT_EQ(top_ids(*logits, 5), top_ids(reference, 5)) << name;

    std::vector<int32_t> generated;
    for (size_t i = 0; i < expected_generation.size(); ++i) {
      const int32_t token = static_cast<int32_t>(
          std::max_element(logits->begin(), logits->end()) - logits->begin());
      generated.push_back(token);
      const int32_t next[1] = {token};
      logits = runner.append(next);
      ASSERT_TRUE(logits) << logits.error();
    }
    EXPECT_EQ(generated, expected_generation) << name;
  }
}

// Slow: ~13k tokens through the model. Skipped in the sanitizer run.
TEST_F(LlamaGolden, SlowPerplexityWithinOnePercentOfReference) {
  const nlohmann::json golden = nlohmann::json::parse(read_file(source_dir() + "/tests/golden/model/perplexity.json"));
  const std::string text = read_file(source_dir() + "/tests/data/perplexity.txt");
  const std::vector<int32_t> tokens = tokenizer_->encode(text, true, false);
  EXPECT_EQ(static_cast<int64_t>(tokens.size()), golden["text_tokens"].get<int64_t>());
  const int32_t ctx = golden["ctx"];
  SequenceRunner runner(*model_, *backend_, ctx);
  std::optional<int32_t> bos;
  if (tokenizer_->add_bos()) bos = tokenizer_->bos_id();
  Expected<PerplexityResult> result = compute_perplexity(runner, tokens, ctx, bos);
  ASSERT_TRUE(result) << result.error();
  const double reference = golden["perplexity"];
  std::printf("perplexity: folio %.4f, llama.cpp %.4f (ctx %d, %lld scored tokens)\n", result->perplexity,
              reference, ctx, static_cast<long long>(result->scored_tokens));
  EXPECT_EQ(result->scored_tokens, golden["scored_tokens"].get<int64_t>());
  EXPECT_NEAR(result->perplexity, reference, 0.01 * reference);
}

}  // namespace
}  // namespace folio
