// The paged engine: continuous batching, chunked prefill, prefix caching, preemption (recompute
// and swap), abort, parallel sampling and beam search on a small random-weight model with the
// default model's weight type (SmallModelTest); stop strings on the default model itself. Every
// scenario compares tokens with each request run alone in an unconstrained engine: the kernels
// compute each token row independently of the batch around it, so the tokens must be identical.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <numeric>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "engine/sequence_runner.h"
#include "model/gguf_file.h"
#include "support/cpu_engine.h"
#include "support/default_model_fixture.h"
#include "support/test_paths.h"

namespace folio {
namespace {

void expect_pool_empty(const Engine& engine) {
  const EngineMetrics m = engine.metrics();
  EXPECT_EQ(m.kv.num_used_blocks, 0);
  EXPECT_EQ(m.kv.num_sequences, 0);
  EXPECT_EQ(m.num_running + m.num_waiting + m.num_swapped, 0);
}

class EngineTest : public testing::SmallModelTest {
 protected:
  // Each prompt alone, in a fresh engine with room to spare.
  static std::vector<std::vector<int32_t>> run_alone(const std::vector<std::vector<int32_t>>& prompts,
                                                     const RequestParams& params) {
    std::vector<std::vector<int32_t>> outputs;
    for (const auto& prompt : prompts) {
      testing::CpuEngine engine_cpu(*model_, *backend_, *tokenizer_, EngineConfig{});
      Engine& engine = engine_cpu.engine;
      outputs.push_back(engine.generate({prompt}, params)[0].tokens);
    }
    return outputs;
  }
};

// Behaviour that needs trained weights and the real vocabulary.
class EngineOnDefaultModelTest : public testing::DefaultModelTest {};

TEST_F(EngineTest, StaggeredContinuousBatchEqualsEachRequestAlone) {
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 32; ++i) prompts.push_back(slice(97 * i, 3 + (i * 37) % 150));
  const RequestParams params = greedy(12);
  const auto alone = run_alone(prompts, params);

  EngineConfig config;
  config.scheduler.max_num_batched_tokens = 128;  // long prompts go in chunks beside decodes
  testing::CpuEngine engine_cpu(*model_, *backend_, *tokenizer_, config);
  Engine& engine = engine_cpu.engine;
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
  testing::CpuEngine engine_cpu(*model_, *backend_, *tokenizer_, config);
  Engine& engine = engine_cpu.engine;
  EXPECT_EQ(engine.generate(prompts, params)[0].tokens, run_alone(prompts, params)[0]);
}

TEST_F(EngineTest, SharedPrefixComputesOnlyTheSuffix) {
  std::vector<int32_t> prefix = slice(1000, 1000);
  std::vector<int32_t> first = prefix, second = prefix;
  const std::vector<int32_t> suffix_a = slice(5000, 20), suffix_b = slice(6000, 25);
  first.insert(first.end(), suffix_a.begin(), suffix_a.end());
  second.insert(second.end(), suffix_b.begin(), suffix_b.end());
  const RequestParams params = greedy(10);

  testing::CpuEngine engine_cpu(*model_, *backend_, *tokenizer_, EngineConfig{});
  Engine& engine = engine_cpu.engine;
  engine.generate({first}, params);
  const int64_t before = engine.metrics().num_prompt_tokens_computed;
  const std::vector<int32_t> warm = engine.generate({second}, params)[0].tokens;
  const int64_t computed = engine.metrics().num_prompt_tokens_computed - before;
  // 1,000 shared tokens = 62 full blocks of 16 (992 tokens) found in the cache.
  EXPECT_EQ(computed, static_cast<int64_t>(second.size()) - 992);
  EXPECT_GT(engine.metrics().kv.prefix_cache.num_hit_tokens, 0);

  EngineConfig cold_config;
  cold_config.enable_prefix_caching = false;
  testing::CpuEngine cold_cpu(*model_, *backend_, *tokenizer_, cold_config);
  Engine& cold = cold_cpu.engine;
  EXPECT_EQ(warm, cold.generate({second}, params)[0].tokens);
  expect_pool_empty(engine);
}

TEST_F(EngineTest, PreemptionByRecomputeAndBySwapKeepsOutputs) {
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) prompts.push_back(slice(300 * i, 60 + 10 * i));
  const RequestParams params = greedy(40);
  const auto alone = run_alone(prompts, params);
  const int64_t block_bytes = testing::block_bytes(*model_);
  for (PreemptionMode mode : {PreemptionMode::kRecompute, PreemptionMode::kSwap}) {
    EngineConfig config;
    KvCacheOptions kv;
    kv.kv_cache_bytes = 24 * block_bytes;  // 384 token slots for ~1,000 tokens of work
    config.scheduler.preemption_mode = mode;
    if (mode == PreemptionMode::kSwap) kv.swap_space_bytes = 200 * block_bytes;
    testing::CpuEngine engine_cpu(*model_, *backend_, *tokenizer_, config, kv);
    Engine& engine = engine_cpu.engine;
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
  testing::CpuEngine engine_cpu(*model_, *backend_, *tokenizer_, EngineConfig{});
  Engine& engine = engine_cpu.engine;
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

TEST_F(EngineOnDefaultModelTest, StopStringEndsTheTextBeforeIt) {
  const std::vector<int32_t> prompt = tokenizer_->encode("The three primary colors are", false, false);
  RequestParams params = greedy(40);
  testing::CpuEngine engine_cpu(*model_, *backend_, *tokenizer_, EngineConfig{});
  Engine& engine = engine_cpu.engine;
  const Generation full = engine.generate({prompt}, params)[0];
  ASSERT_GT(full.text.size(), 20u);
  const std::string stop = full.text.substr(10, 4);
  params.stop = {stop};
  const Generation stopped = engine.generate({prompt}, params)[0];
  EXPECT_EQ(stopped.finish_reason, FinishReason::kStop);
  EXPECT_EQ(stopped.text, full.text.substr(0, full.text.find(stop)));
}

TEST_F(EngineTest, RejectsRequestsThatCanNeverFit) {
  KvCacheOptions kv;
  kv.kv_cache_bytes = 4 * testing::block_bytes(*model_);
  testing::CpuEngine engine_cpu(*model_, *backend_, *tokenizer_, EngineConfig{}, kv);
  Engine& engine = engine_cpu.engine;
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
  testing::CpuEngine engine_cpu(*model_, *backend_, *tokenizer_, EngineConfig{});
  Engine& engine = engine_cpu.engine;
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
    testing::CpuEngine alone_cpu(*model_, *backend_, *tokenizer_, EngineConfig{});
    Engine& alone = alone_cpu.engine;
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
  std::printf("n=4: peak %d blocks shared vs %d with full copies (%.0f%% saved)\n", peak_blocks, 4 * alone_peak,
              100.0 * (1.0 - static_cast<double>(peak_blocks) / (4 * alone_peak)));
  EXPECT_LT(peak_blocks, 4 * alone_peak);
  EXPECT_LE(peak_blocks, alone_peak + 3 * 3);
}

}  // namespace
}  // namespace folio

namespace folio {
namespace {

// Beam search against a naive reference that keeps a full copy of every beam and recomputes
// each from scratch every step (SequenceRunner); same selection rule written out here.
struct ReferenceBeam {
  std::vector<int32_t> tokens;
  double cum_logprob = 0.0;
};

std::vector<std::vector<int32_t>> reference_beam_search(ModelWeights& model, cpu::CpuBackend& backend,
                                                        const Tokenizer& tokenizer, const std::vector<int32_t>& prompt,
                                                        int32_t width, int32_t max_tokens) {
  std::vector<ReferenceBeam> live = {{}};
  std::vector<std::pair<double, std::vector<int32_t>>> ended;  // (score, tokens)
  for (int32_t step = 0; step < max_tokens && !live.empty(); ++step) {
    struct Candidate {
      double cum;
      int32_t beam;
      int32_t token;
    };
    std::vector<Candidate> candidates;
    for (int32_t b = 0; b < static_cast<int32_t>(live.size()); ++b) {
      std::vector<int32_t> context = prompt;
      context.insert(context.end(), live[b].tokens.begin(), live[b].tokens.end());
      const int32_t tokens = static_cast<int32_t>(context.size()) + 1;
      cpu::CpuExecutor executor(model, backend, (tokens + 15) / 16 + 1, 16, 0);
      SequenceRunner runner(executor, tokens);
      const std::vector<float> logits = runner.append(context).value();
      double max_logit = -1e300, sum = 0.0;
      for (float l : logits) max_logit = std::max(max_logit, static_cast<double>(l));
      for (float l : logits) sum += std::exp(l - max_logit);
      const double log_sum = std::log(sum) + max_logit;
      std::vector<int32_t> ids(logits.size());
      std::iota(ids.begin(), ids.end(), 0);
      std::sort(ids.begin(), ids.end(),
                [&](int32_t x, int32_t y) { return logits[x] > logits[y] || (logits[x] == logits[y] && x < y); });
      for (int32_t k = 0; k < 2 * width; ++k)
        candidates.push_back({live[b].cum_logprob + (logits[ids[k]] - log_sum), b, ids[k]});
    }
    std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& x, const Candidate& y) {
      if (x.cum != y.cum) return x.cum > y.cum;
      if (x.beam != y.beam) return x.beam < y.beam;
      return x.token < y.token;
    });
    std::vector<ReferenceBeam> next;
    for (size_t rank = 0; rank < candidates.size() && static_cast<int32_t>(next.size()) < width; ++rank) {
      std::vector<int32_t> tokens = live[candidates[rank].beam].tokens;
      tokens.push_back(candidates[rank].token);
      if (tokenizer.is_end_of_generation(candidates[rank].token)) {
        if (static_cast<int32_t>(rank) < width) ended.push_back({candidates[rank].cum / tokens.size(), tokens});
      } else {
        next.push_back({tokens, candidates[rank].cum});
      }
    }
    live.clear();
    for (ReferenceBeam& beam : next) {
      if (static_cast<int32_t>(beam.tokens.size()) >= max_tokens) {
        ended.push_back({beam.cum_logprob / beam.tokens.size(), beam.tokens});
      } else {
        live.push_back(beam);
      }
    }
    if (static_cast<int32_t>(ended.size()) >= width && !live.empty()) {
      std::vector<double> scores;
      for (const auto& e : ended) scores.push_back(e.first);
      std::sort(scores.rbegin(), scores.rend());
      double best_live = -1e300;
      for (const ReferenceBeam& beam : live) best_live = std::max(best_live, beam.cum_logprob / beam.tokens.size());
      if (best_live <= scores[width - 1]) break;
    }
  }
  for (const ReferenceBeam& beam : live) ended.push_back({beam.cum_logprob / beam.tokens.size(), beam.tokens});
  std::stable_sort(ended.begin(), ended.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  std::vector<std::vector<int32_t>> result;
  for (int32_t i = 0; i < std::min<int32_t>(width, static_cast<int32_t>(ended.size())); ++i)
    result.push_back(ended[i].second);
  return result;
}

TEST_F(EngineTest, BeamSearchEqualsFullCopyReference) {
  const std::vector<int32_t> prompt = slice(3000, 40);
  constexpr int32_t kWidth = 4, kMaxTokens = 12;
  RequestParams params;
  params.beam_width = kWidth;
  params.max_tokens = kMaxTokens;
  testing::CpuEngine engine_cpu(*model_, *backend_, *tokenizer_, EngineConfig{});
  Engine& engine = engine_cpu.engine;
  const RequestId id = engine.add_request(prompt, params).value();
  std::vector<std::vector<int32_t>> hypotheses(kWidth);
  int32_t peak_blocks = 0, outputs = 0;
  while (engine.has_unfinished_requests()) {
    for (const RequestOutput& out : engine.step()) {
      ASSERT_EQ(out.id, id);
      ASSERT_TRUE(out.finished);
      hypotheses.at(out.index) = out.new_tokens;
      ++outputs;
    }
    peak_blocks = std::max(peak_blocks, engine.metrics().kv.num_used_blocks);
  }
  engine.step();  // drops the finished beams
  expect_pool_empty(engine);
  const auto reference = reference_beam_search(*model_, *backend_, *tokenizer_, prompt, kWidth, kMaxTokens);
  ASSERT_EQ(outputs, static_cast<int32_t>(reference.size()));
  for (size_t i = 0; i < reference.size(); ++i) EXPECT_EQ(hypotheses[i], reference[i]) << "hypothesis " << i;
  const int32_t full_copies = kWidth * static_cast<int32_t>((prompt.size() + kMaxTokens + 15) / 16);
  std::printf("beam width %d: peak %d KV blocks shared vs %d with full copies (%.0f%% saved)\n", kWidth, peak_blocks,
              full_copies, 100.0 * (1.0 - static_cast<double>(peak_blocks) / full_copies));
  EXPECT_LT(peak_blocks, full_copies);
}

}  // namespace
}  // namespace folio
