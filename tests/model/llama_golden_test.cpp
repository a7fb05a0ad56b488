// End to end on the default model against two independent references running the same GGUF
// file (goldens from scripts/make-model-goldens.py), for five prompts (plain, chat, code,
// French, 1,184 tokens):
//  - a float64 numpy forward (scripts/reference_forward.py): folio with float32 activations
//    must give the same 64 greedy tokens and last-position logits within 3e-2;
//  - llama.cpp (llama-cpp-python): folio's default path quantizes activations to 8 bits as
//    llama.cpp does. This model is so sensitive to rounding that llama.cpp disagrees with
//    itself (f16 vs f32 KV cache) within 4 tokens on some prompts, and with the float64
//    reference within 4-27 tokens on four of the five; so the greedy tokens must match until the
//    first step where llama.cpp's own top-2 margin is a near-tie, and the logits must agree
//    within llama.cpp's own configuration-to-configuration spread.
// Plus perplexity within 1% of llama.cpp's.
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
#include "model/gguf_tokenizer.h"
#include "model/model_weights.h"
#include "support/cpu_engine.h"
#include "support/greedy_run.h"
#include "support/test_paths.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace folio {
namespace {

using testing::expect_equal_until_near_tie;
using testing::GreedyRun;
using testing::max_abs_difference;
using testing::read_file;
using testing::run_greedy;
using testing::source_dir;

class LlamaGolden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = testing::default_model_path();
    ASSERT_TRUE(std::filesystem::exists(path)) << testing::missing_model_message(path);
    Expected<GgufFile> opened = GgufFile::open(path);
    ASSERT_TRUE(opened) << opened.error();
    file_ = new GgufFile(std::move(opened).value());
    Expected<std::unique_ptr<ModelWeights>> model = ModelWeights::load(*file_);
    ASSERT_TRUE(model) << model.error();
    model_ = std::move(model).value().release();
    Expected<Tokenizer> tokenizer = tokenizer_from_gguf(*file_);
    ASSERT_TRUE(tokenizer) << tokenizer.error();
    tokenizer_ = new Tokenizer(std::move(tokenizer).value());
    backend_ = new cpu::CpuBackend();
    goldens_ =
        new nlohmann::json(nlohmann::json::parse(read_file(source_dir() + "/tests/golden/model/smollm2_q4_1.json")));
  }
  static void TearDownTestSuite() {
    delete goldens_;
    delete backend_;
    delete tokenizer_;
    delete model_;
    delete file_;
  }

  static std::vector<float> golden_logits(const std::string& name, const std::string& kind = "") {
    const std::string bytes =
        read_file(source_dir() + "/tests/golden/model/smollm2_q4_1." + name + kind + ".logits.f32");
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
  static inline ModelWeights* model_ = nullptr;
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
  Expected<std::string> text =
      chat_template->render(messages, true, {{"bos_token", "<|im_start|>"}, {"eos_token", "<|im_end|>"}});
  ASSERT_TRUE(text) << text.error();
  EXPECT_EQ(*text, (*chat_case)["text"].get<std::string>());
}

// Token for token until the float64 reference's own top two are within 0.05 (float32 sums
// cannot be expected to pick the float64 winner there: the French prompt has one at 0.0001).
TEST_F(LlamaGolden, SlowFloatActivationsFollowFloat64ReferenceUntilANearTie) {
  cpu::CpuBackend precise(0, cpu::detect_isa(), cpu::ActivationPrecision::kFloat32);
  for (const nlohmann::json& c : (*goldens_)["cases"]) {
    const std::string name = c["name"];
    const std::vector<int32_t> expected = c["f64_generated_ids"];
    const GreedyRun run = run_greedy(*model_, precise, c["prompt_ids"], expected.size(), 2048);
    const std::vector<float> reference = golden_logits(name, ".f64");
    const double max_abs = max_abs_difference(run.last_prompt_logits, reference);
    std::printf("[%s] float32 activations vs float64 reference: last-position logits max |diff| = %.5f\n", name.c_str(),
                max_abs);
    EXPECT_LT(max_abs, 3e-2) << name;  // float32 sums over 30 layers vs float64
    EXPECT_EQ(top_ids(run.last_prompt_logits, 5), top_ids(reference, 5)) << name;
    expect_equal_until_near_tie(name, "float64", run.generated, expected, c["f64_generated_margins"], 0.05);
  }
}

TEST_F(LlamaGolden, SlowQuantizedActivationsFollowLlamaCppUntilANearTie) {
  constexpr double kNearTie = 0.5;  // logits; llama.cpp's own f16/f32-KV spread is 0.5-1.0
  for (const nlohmann::json& c : (*goldens_)["cases"]) {
    const std::string name = c["name"];
    const std::vector<int32_t> expected = c["generated_ids"];
    const std::vector<double> margins = c["generated_margins"];
    const GreedyRun run = run_greedy(*model_, *backend_, c["prompt_ids"], expected.size(), 2048);
    const double max_abs = max_abs_difference(run.last_prompt_logits, golden_logits(name));
    EXPECT_LT(max_abs, 1.5) << name;
    // The same top-5, up to near-ties: each of our top five is within kNearTie of llama.cpp's
    // fifth logit, and the first is the same unless llama.cpp's top two are a near-tie.
    const std::vector<float> reference = golden_logits(name);
    const std::vector<int32_t> ours = top_ids(run.last_prompt_logits, 5), theirs = top_ids(reference, 5);
    for (int32_t id : ours) {
      EXPECT_GT(reference[id], reference[theirs[4]] - kNearTie) << name << " id " << id;
    }
    if (reference[theirs[0]] - reference[theirs[1]] >= kNearTie) {
      EXPECT_EQ(ours[0], theirs[0]) << name;
    }
    size_t agree = 0;
    while (agree < expected.size() && run.generated[agree] == expected[agree]) ++agree;
    std::printf("[%s] quantized activations vs llama.cpp: logits max |diff| = %.4f, %zu/%zu greedy tokens equal%s\n",
                name.c_str(), max_abs, agree, expected.size(),
                agree < expected.size()
                    ? (", then a near-tie (llama.cpp margin " + std::to_string(margins[agree]) + ")").c_str()
                    : "");
    if (agree < expected.size()) {
      EXPECT_LT(margins[agree], kNearTie) << name << " diverges at step " << agree;
    }
  }
}

// Slow: ~13k tokens through the model. Skipped in the sanitizer run.
TEST_F(LlamaGolden, SlowPerplexityWithinOnePercentOfReference) {
  const nlohmann::json golden = nlohmann::json::parse(read_file(source_dir() + "/tests/golden/model/perplexity.json"));
  const std::string text = read_file(source_dir() + "/tests/data/perplexity.txt");
  const std::vector<int32_t> tokens = tokenizer_->encode(text, true, false);
  EXPECT_EQ(static_cast<int64_t>(tokens.size()), golden["text_tokens"].get<int64_t>());
  const int32_t ctx = golden["ctx"];
  const auto executor = testing::sequence_executor(*model_, *backend_, ctx);
  SequenceRunner runner(*executor, ctx);
  std::optional<int32_t> bos;
  if (tokenizer_->add_bos()) bos = tokenizer_->bos_id();
  Expected<PerplexityResult> result = compute_perplexity(runner, tokens, ctx, bos);
  ASSERT_TRUE(result) << result.error();
  const double reference = golden["perplexity"];
  std::printf("perplexity: folio %.4f, llama.cpp %.4f (ctx %d, %lld scored tokens)\n", result->perplexity, reference,
              ctx, static_cast<long long>(result->scored_tokens));
  EXPECT_EQ(result->scored_tokens, golden["scored_tokens"].get<int64_t>());
  EXPECT_NEAR(result->perplexity, reference, 0.01 * reference);
}

}  // namespace
}  // namespace folio
