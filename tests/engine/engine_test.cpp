// The paged engine on the default model: continuous batching, chunked prefill, prefix caching,
// preemption (recompute and swap), abort, stop strings. Every scenario compares greedy tokens
// with each request run alone in an unconstrained engine: the kernels compute each token row
// independently of the batch around it, so the tokens must be identical.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "model/gguf_file.h"
#include "support/test_paths.h"

namespace folio {
namespace {

class EngineTest : public ::testing::Test {
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
    params.ignore_eos = true;  // fixed lengths make the comparison complete
    return params;
  }

  // Each prompt alone, in a fresh engine with room to spare.
  static std::vector<std::vector<int32_t>> run_alone(const std::vector<std::vector<int32_t>>& prompts,
                                                     const RequestParams& params) {
    std::vector<std::vector<int32_t>> outputs;
    for (const auto& prompt : prompts) {
      Engine engine(*model_, *backend_, *tokenizer_, EngineConfig{});
      outputs.push_back(engine.generate({prompt}, params)[0].tokens);
    }
    return outputs;
  }

  static void expect_pool_empty(const Engine& engine) {
    const EngineMetrics m = engine.metrics();
    EXPECT_EQ(m.kv.num_used_blocks, 0);
    EXPECT_EQ(m.kv.num_sequences, 0);
    EXPECT_EQ(m.num_running + m.num_waiting + m.num_swapped, 0);
  }

  static inline GgufFile* file_ = nullptr;
  static inline LlamaModel* model_ = nullptr;
  static inline Tokenizer* tokenizer_ = nullptr;
  static inline cpu::CpuBackend* backend_ = nullptr;
  static inline std::vector<int32_t>* text_tokens_ = nullptr;
};

TEST_F(EngineTest, StaggeredContinuousBatchEqualsEachRequestAlone) {
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 32; ++i) prompts.push_back(slice(97 * i, 3 + (i * 37) % 150));
  const RequestParams params = greedy(12);
  const auto alone = run_alone(prompts, params);

  EngineConfig config;
  config.scheduler.max_num_batched_tokens = 128;  // long prompts go in chunks beside decodes
  Engine engine(*model_, *backend_, *tokenizer_, config);
  std::map<RequestId, size_t> index;
  std::vector<std::vector<int32_t>> batched(prompts.size());
  size_t next = 0;
  int32_t max_running = 0;
  while (next < prompts.size() || engine.has_unfinished_requests()) {
    for (int k = 0; k < 3 && next < prompts.size(); ++k, ++next) {  // three arrivals per step
      index[engine.add_request(prompts[next], params).value()] = next;
    }
    for (const RequestOutput& out : engine.step()) {
      auto& tokens = batched[index.at(out.id)];
      tokens.insert(tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
    }
    max_running = std::max(max_running, engine.metrics().num_running);
  }
  EXPECT_GT(max_running, 8);  // it really batched
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(batched[i], alone[i]) << "request " << i;
  expect_pool_empty(engine);
}

TEST_F(EngineTest, ChunkedPrefillEqualsWholePrefill) {
  const std::vector<std::vector<int32_t>> prompts = {slice(0, 700)};
  const RequestParams params = greedy(8);
  EngineConfig config;
  config.scheduler.max_num_batched_tokens = 64;
  Engine engine(*model_, *backend_, *tokenizer_, config);
  EXPECT_EQ(engine.generate(prompts, params)[0].tokens, run_alone(prompts, params)[0]);
}

TEST_F(EngineTest, SharedPrefixComputesOnlyTheSuffix) {
  std::vector<int32_t> prefix = slice(1000, 1000);
  std::vector<int32_t> first = prefix, second = prefix;
  const std::vector<int32_t> suffix_a = slice(5000, 20), suffix_b = slice(6000, 25);
  first.insert(first.end(), suffix_a.begin(), suffix_a.end());
  second.insert(second.end(), suffix_b.begin(), suffix_b.end());
  const RequestParams params = greedy(10);

  Engine engine(*model_, *backend_, *tokenizer_, EngineConfig{});
  engine.generate({first}, params);
  const int64_t before = engine.metrics().num_prompt_tokens_computed;
  const std::vector<int32_t> warm = engine.generate({second}, params)[0].tokens;
  const int64_t computed = engine.metrics().num_prompt_tokens_computed - before;
  // 1,000 shared tokens = 62 full blocks of 16 (992 tokens) found in the cache.
  EXPECT_EQ(computed, static_cast<int64_t>(second.size()) - 992);
  EXPECT_GT(engine.metrics().kv.prefix_cache.num_hit_tokens, 0);

  EngineConfig cold_config;
  cold_config.enable_prefix_caching = false;
  Engine cold(*model_, *backend_, *tokenizer_, cold_config);
  EXPECT_EQ(warm, cold.generate({second}, params)[0].tokens);
  expect_pool_empty(engine);
}


TEST_F(EngineTest, PreemptionByRecomputeAndBySwapKeepsOutputs) {
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) prompts.push_back(slice(300 * i, 60 + 10 * i));
  const RequestParams params = greedy(40);
  const auto alone = run_alone(prompts, params);
  const int64_t block_bytes = static_cast<int64_t>(model_->kv_shape(1, 16).bytes_per_block());
  for (PreemptionMode mode : {PreemptionMode::kRecompute, PreemptionMode::kSwap}) {
    EngineConfig config;
    config.kv_cache_bytes = 24 * block_bytes;  // 384 token slots for ~1,000 tokens of work
    config.scheduler.preemption_mode = mode;
    if (mode == PreemptionMode::kSwap) config.swap_space_bytes = 200 * block_bytes;
    Engine engine(*model_, *backend_, *tokenizer_, config);
    const std::vector<Generation> results = engine.generate(prompts, params);
    EXPECT_GT(engine.metrics().num_preemptions, 0);
    if (mode == PreemptionMode::kSwap) {
      EXPECT_GT(engine.metrics().kv.num_swapped_out_blocks, 0);
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(results[i].tokens, alone[i]) << "request " << i << " mode " << static_cast<int>(mode);
      EXPECT_EQ(results[i].finish_reason, FinishReason::kLength);
    }
    expect_pool_empty(engine);
  }
}

TEST_F(EngineTest, AbortFreesBlocksAtOnce) {
  Engine engine(*model_, *backend_, *tokenizer_, EngineConfig{});
  const RequestId a = engine.add_request(slice(0, 100), greedy(50)).value();
  const RequestId b = engine.add_request(slice(200, 100), greedy(50)).value();
  for (int i = 0; i < 3; ++i) engine.step();
  const int32_t used_before = engine.metrics().kv.num_used_blocks;
  EXPECT_TRUE(engine.abort(a));
  EXPECT_LT(engine.metrics().kv.num_used_blocks, used_before);
  EXPECT_FALSE(engine.abort(a));
  bool saw_abort = false;
  while (engine.has_unfinished_requests()) {
    for (const RequestOutput& out : engine.step()) {
      if (out.id == a) saw_abort = out.finished && out.finish_reason == FinishReason::kAbort;
    }
  }
  EXPECT_TRUE(saw_abort);
  EXPECT_FALSE(engine.abort(b));
  expect_pool_empty(engine);
}

TEST_F(EngineTest, StopStringEndsTheTextBeforeIt) {
  const std::vector<int32_t> prompt = tokenizer_->encode("The three primary colors are", false, false);
  RequestParams params = greedy(40);
  Engine engine(*model_, *backend_, *tokenizer_, EngineConfig{});
  const Generation full = engine.generate({prompt}, params)[0];
  ASSERT_GT(full.text.size(), 20u);
  const std::string stop = full.text.substr(10, 4);
  params.stop = {stop};
  const Generation stopped = engine.generate({prompt}, params)[0];
  EXPECT_EQ(stopped.finish_reason, FinishReason::kStop);
  EXPECT_EQ(stopped.text, full.text.substr(0, full.text.find(stop)));
}

TEST_F(EngineTest, RejectsRequestsThatCanNeverFit) {
  EngineConfig config;
  config.kv_cache_bytes = 4 * static_cast<int64_t>(model_->kv_shape(1, 16).bytes_per_block());
  Engine engine(*model_, *backend_, *tokenizer_, config);
  EXPECT_FALSE(engine.add_request(slice(0, 100), greedy(10)));
  EXPECT_FALSE(engine.add_request({}, greedy(10)));
  EXPECT_FALSE(engine.add_request({-1}, greedy(10)));
  EXPECT_FALSE(engine.add_request(slice(0, 10), greedy(0)));
  EXPECT_TRUE(engine.add_request(slice(0, 10), greedy(10)));
}

}  // namespace
}  // namespace folio

namespace folio {
namespace {

// n parallel samples: one prefill, then forks sharing the prompt's blocks. Sample i must equal
// a request run alone with seed + i (the reference with a full copy of everything).
TEST_F(EngineTest, ParallelSamplingForksAndEqualsIndependentRuns) {
  const std::vector<int32_t> prompt = slice(2000, 200);
  RequestParams params;
  params.sampling.temperature = 0.9f;
  params.sampling.seed = 1234;
  params.max_tokens = 20;
  params.ignore_eos = true;
  params.n = 4;
  Engine engine(*model_, *backend_, *tokenizer_, EngineConfig{});
  const RequestId id = engine.add_request(prompt, params).value();
  std::vector<std::vector<int32_t>> samples(4);
  int32_t peak_blocks = 0;
  while (engine.has_unfinished_requests()) {
    for (const RequestOutput& out : engine.step()) {
      ASSERT_EQ(out.id, id);
      samples.at(out.index).insert(samples[out.index].end(), out.new_tokens.begin(), out.new_tokens.end());
    }
    peak_blocks = std::max(peak_blocks, engine.metrics().kv.num_used_blocks);
  }
  expect_pool_empty(engine);
  int32_t alone_peak = 0;
  for (int32_t i = 0; i < 4; ++i) {
    RequestParams single = params;
    single.n = 1;
    single.sampling.seed = 1234 + i;
    Engine alone(*model_, *backend_, *tokenizer_, EngineConfig{});
    const RequestId single_id = alone.add_request(prompt, single).value();
    std::vector<int32_t> tokens;
    while (alone.has_unfinished_requests()) {
      for (const RequestOutput& out : alone.step()) {
        EXPECT_EQ(out.id, single_id);
        tokens.insert(tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
      }
      alone_peak = std::max(alone_peak, alone.metrics().kv.num_used_blocks);
    }
    EXPECT_EQ(samples[i], tokens) << "sample " << i;
  }
  EXPECT_NE(samples[0], samples[1]);
  // 220 tokens = 14 blocks each; shared, the 12 full prompt blocks are held once.
  std::printf("n=4: peak %d blocks shared vs %d with full copies (%.0f%% saved)\n", peak_blocks,
              4 * alone_peak, 100.0 * (1.0 - static_cast<double>(peak_blocks) / (4 * alone_peak)));
  EXPECT_LT(peak_blocks, 4 * alone_peak);
  EXPECT_LE(peak_blocks, alone_peak + 3 * 3);
}

}  // namespace
}  // namespace folio
