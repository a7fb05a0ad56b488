// The engine's executor-side greedy sampling (ModelExecutor::forward_greedy, what the CUDA
// executor does on the GPU so that vocab-wide logit rows stay on the device), checked on the
// CPU: an executor that picks greedy tokens itself must give the engine exactly the tokens,
// and the logprobs, that the engine's own Sampler gives; steps with any row the executor cannot
// serve (temperature, penalties, top logprobs, beams) must fall back to the Sampler.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>

#include "backend/cpu/cpu_backend.h"
#include "engine/cpu_model_executor.h"
#include "engine/engine.h"
#include "model/gguf_file.h"
#include "support/test_paths.h"

namespace folio {
namespace {

// The CPU executor plus greedy sampling of its own: argmax (ties to the lowest id, NaN never
// wins) and the raw log-softmax of the chosen token, computed in double.
class GreedySamplingExecutor final : public ModelExecutor {
 public:
  GreedySamplingExecutor(LlamaModel& model, Backend& backend, int32_t num_blocks)
      : inner_(model, backend, num_blocks, 16, 0) {}

  const ModelConfig& config() const override { return inner_.config(); }
  int32_t block_size() const override { return inner_.block_size(); }
  int32_t num_kv_blocks() const override { return inner_.num_kv_blocks(); }
  int32_t num_host_blocks() const override { return inner_.num_host_blocks(); }
  void copy_blocks(std::span<const BlockCopy> copies) override { inner_.copy_blocks(copies); }
  std::span<const float> forward(const ForwardBatch& batch) override {
    ++host_rows_steps;
    return inner_.forward(batch);
  }
  bool can_sample_greedy() const override { return true; }
  std::span<const GreedySample> forward_greedy(const ForwardBatch& batch) override {
    ++greedy_steps;
    const std::span<const float> logits = inner_.forward(batch);
    const size_t vocab = static_cast<size_t>(config().vocab_size);
    samples_.clear();
    for (size_t row = 0; row < batch.logit_rows.size(); ++row) {
      const std::span<const float> x = logits.subspan(row * vocab, vocab);
      int32_t best = 0;
      float best_value = -INFINITY;
      float max_value = -INFINITY;
      for (size_t i = 0; i < vocab; ++i) {
        if (x[i] > best_value) {
          best_value = x[i];
          best = static_cast<int32_t>(i);
        }
        max_value = std::fmax(max_value, x[i]);
      }
      double sum = 0.0;
      for (size_t i = 0; i < vocab; ++i) {
        if (x[i] == x[i]) sum += std::exp(static_cast<double>(x[i]) - max_value);
      }
      const double log_normalizer = max_value + std::log(sum);
      samples_.push_back({best, static_cast<float>(x[static_cast<size_t>(best)] - log_normalizer)});
    }
    return samples_;
  }

  int64_t greedy_steps = 0;
  int64_t host_rows_steps = 0;

 private:
  CpuModelExecutor inner_;
  std::vector<GreedySample> samples_;
};

class EngineDeviceSamplingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = testing::default_model_path();
    ASSERT_TRUE(std::filesystem::exists(path)) << testing::missing_model_message(path);
    file_ = new GgufFile(std::move(GgufFile::open(path)).value());
    model_ = LlamaModel::load(*file_).value().release();
    tokenizer_ = new Tokenizer(std::move(Tokenizer::from_gguf(*file_)).value());
    backend_ = new cpu::CpuBackend();
    text_tokens_ = new std::vector<int32_t>(tokenizer_->encode(
        testing::read_file(testing::source_dir() + "/tests/data/perplexity.txt"), false, false));
  }
  static void TearDownTestSuite() {
    delete text_tokens_;
    delete backend_;
    delete tokenizer_;
    delete model_;
    delete file_;
  }

  static std::vector<int32_t> slice(size_t offset, size_t length) {
    return {text_tokens_->begin() + offset, text_tokens_->begin() + offset + length};
  }

  static RequestParams greedy(int32_t max_tokens) {
    RequestParams params;
    params.sampling.temperature = 0.0f;
    params.max_tokens = max_tokens;
    params.ignore_eos = true;
    return params;
  }

  static int32_t num_blocks() {
    const int64_t per_block = static_cast<int64_t>(model_->kv_shape(1, 16).bytes_per_block());
    return static_cast<int32_t>((int64_t{256} << 20) / per_block) + 1;
  }

  // Runs the requests (all added at once) to completion; tokens and samples per request.
  struct Outcome {
    std::vector<std::vector<int32_t>> tokens;
    std::vector<std::vector<SampleResult>> samples;
  };
  static Outcome run(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                     const std::vector<RequestParams>& params) {
    std::map<RequestId, size_t> index;
    for (size_t i = 0; i < prompts.size(); ++i) index[engine.add_request(prompts[i], params[i]).value()] = i;
    Outcome out{std::vector<std::vector<int32_t>>(prompts.size()), std::vector<std::vector<SampleResult>>(prompts.size())};
    while (engine.has_unfinished_requests()) {
      for (const RequestOutput& o : engine.step()) {
        const size_t i = index.at(o.id);
        out.tokens[i].insert(out.tokens[i].end(), o.new_tokens.begin(), o.new_tokens.end());
        out.samples[i].insert(out.samples[i].end(), o.new_samples.begin(), o.new_samples.end());
      }
    }
    return out;
  }

  static inline GgufFile* file_ = nullptr;
  static inline LlamaModel* model_ = nullptr;
  static inline Tokenizer* tokenizer_ = nullptr;
  static inline cpu::CpuBackend* backend_ = nullptr;
  static inline std::vector<int32_t>* text_tokens_ = nullptr;
};

TEST_F(EngineDeviceSamplingTest, GreedyTokensAndLogprobsEqualTheSamplers) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestParams> params;
  for (int i = 0; i < 12; ++i) {
    prompts.push_back(slice(131 * i, 5 + (i * 29) % 90));
    params.push_back(greedy(10));
    params.back().sampling.logprobs = i % 3 == 0 ? 0 : -1;
  }
  EngineConfig config;
  config.scheduler.max_num_batched_tokens = 96;  // chunked prefills beside decodes
  Engine reference(*model_, *backend_, *tokenizer_, config);
  const Outcome want = run(reference, prompts, params);

  GreedySamplingExecutor executor(*model_, *backend_, num_blocks());
  Engine engine(executor, *tokenizer_, config);
  const Outcome got = run(engine, prompts, params);

  EXPECT_EQ(got.tokens, want.tokens);
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(got.samples[i].size(), want.samples[i].size()) << "request " << i;
    for (size_t t = 0; t < got.samples[i].size(); ++t) {
      EXPECT_EQ(got.samples[i][t].token, want.samples[i][t].token);
      EXPECT_NEAR(got.samples[i][t].logprob, want.samples[i][t].logprob, 1e-4) << "request " << i << " token " << t;
      EXPECT_TRUE(got.samples[i][t].top_logprobs.empty());
    }
  }
  // Every step that sampled went through the executor's sampling.
  EXPECT_GT(executor.greedy_steps, 0);
  EXPECT_EQ(engine.metrics().num_device_sampled_steps, executor.greedy_steps);
  EXPECT_EQ(executor.host_rows_steps, 0);
}

TEST_F(EngineDeviceSamplingTest, StepsWithRowsTheExecutorCannotServeUseTheSampler) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestParams> params;
  for (int i = 0; i < 4; ++i) {
    prompts.push_back(slice(211 * i, 20 + 7 * i));
    params.push_back(greedy(8 + 4 * i));
  }
  params[0].max_tokens = 20;  // outlives the others: its last steps are greedy-only
  params[1].sampling.temperature = 0.8f;
  params[1].sampling.seed = 5;
  params[2].sampling.repetition_penalty = 1.3f;
  params[2].max_tokens = 6;
  params[3].sampling.logprobs = 2;
  params[3].max_tokens = 4;
  EngineConfig config;
  Engine reference(*model_, *backend_, *tokenizer_, config);
  const Outcome want = run(reference, prompts, params);

  GreedySamplingExecutor executor(*model_, *backend_, num_blocks());
  Engine engine(executor, *tokenizer_, config);
  const Outcome got = run(engine, prompts, params);

  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_GT(executor.host_rows_steps, 0);
  EXPECT_GT(executor.greedy_steps, 0);  // request 0's last 8 steps, alone
  ASSERT_EQ(got.samples[3].size(), want.samples[3].size());
  for (size_t t = 0; t < got.samples[3].size(); ++t) {
    EXPECT_EQ(got.samples[3][t].top_logprobs, want.samples[3][t].top_logprobs);
  }
}

}  // namespace
}  // namespace folio
