// The engine's executor-side sampling, checked on the CPU with an executor that samples the
// way the CUDA executor's sample_tokens kernel does (Capabilities::samples_on_device, a
// SamplingPlan per step): greedy rows must give the engine exactly the tokens, and the logprobs,
// that the engine's own Sampler gives; every row but top logprobs, beams and the fork step of
// n > 1 goes through the executor, with the penalty lists the Sampler would use and a random
// stream per request (seed, step) that makes a seeded request's tokens independent of the batch
// it runs in; steps with a row it cannot serve fall back to the Sampler.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_executor.h"
#include "engine/engine.h"
#include "model/gguf_file.h"
#include "support/cpu_engine.h"
#include "support/default_model_fixture.h"
#include "support/sampling_executor.h"
#include "support/test_paths.h"

namespace folio {
namespace {

class EngineDeviceSamplingTest : public testing::SmallModelTest {
 protected:
  static int32_t num_blocks() { return static_cast<int32_t>((int64_t{256} << 20) / testing::block_bytes(*model_)) + 1; }

  // Runs the requests (all added at once) to completion; tokens and samples per request.
  struct Outcome {
    std::vector<std::vector<int32_t>> tokens;
    std::vector<std::vector<SampleResult>> samples;
  };
  static Outcome run(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                     const std::vector<RequestParams>& params) {
    std::map<RequestId, size_t> index;
    for (size_t i = 0; i < prompts.size(); ++i) index[engine.add_request(prompts[i], params[i]).value()] = i;
    Outcome out{std::vector<std::vector<int32_t>>(prompts.size()),
                std::vector<std::vector<SampleResult>>(prompts.size())};
    while (engine.has_unfinished_requests()) {
      for (const RequestOutput& o : engine.step()) {
        const size_t i = index.at(o.id);
        out.tokens[i].insert(out.tokens[i].end(), o.new_tokens.begin(), o.new_tokens.end());
        out.samples[i].insert(out.samples[i].end(), o.new_samples.begin(), o.new_samples.end());
      }
    }
    return out;
  }
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
  testing::CpuEngine reference_cpu(*model_, *backend_, *tokenizer_, config);
  Engine& reference = reference_cpu.engine;
  const Outcome want = run(reference, prompts, params);

  testing::SamplingExecutor executor(*model_, *backend_, num_blocks());
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
  EXPECT_EQ(executor.greedy_steps, executor.sample_steps);
  EXPECT_EQ(engine.metrics().num_device_sampled_steps, executor.greedy_steps);
  EXPECT_EQ(executor.host_rows_steps, 0);
}

// A step with a row the executor cannot serve (top logprobs) runs on the host for all of its
// rows; the other steps sample on the executor. The deterministic rows (greedy, penalized
// greedy, top logprobs) give the Sampler's tokens either way.
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
  testing::CpuEngine reference_cpu(*model_, *backend_, *tokenizer_, config);
  const Outcome want = run(reference_cpu.engine, prompts, params);

  testing::SamplingExecutor executor(*model_, *backend_, num_blocks());
  Engine engine(executor, *tokenizer_, config);
  const Outcome got = run(engine, prompts, params);

  for (size_t i : {0, 2, 3}) EXPECT_EQ(got.tokens[i], want.tokens[i]) << "request " << i;
  EXPECT_EQ(got.tokens[1].size(), want.tokens[1].size());
  EXPECT_EQ(executor.host_rows_steps, 4);  // the steps where request 3 samples
  EXPECT_GT(executor.greedy_steps, 0);     // request 0's last 8 steps, alone
  ASSERT_EQ(got.samples[3].size(), want.samples[3].size());
  for (size_t t = 0; t < got.samples[3].size(); ++t) {
    EXPECT_EQ(got.samples[3][t].top_logprobs, want.samples[3][t].top_logprobs);
  }
}

// Greedy rows with penalties through the executor's sampling: the engine's (token, count)
// lists must penalize exactly what the Sampler penalizes, so the tokens are the Sampler's.
TEST_F(EngineDeviceSamplingTest, PenalizedGreedyRowsThroughTheExecutorEqualTheSamplers) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestParams> params;
  for (int i = 0; i < 6; ++i) {
    prompts.push_back(slice(173 * i, 12 + 11 * i));
    params.push_back(greedy(12));
    params.back().sampling.logprobs = i % 2 == 0 ? 0 : -1;
  }
  params[0].sampling.repetition_penalty = 1.3f;
  params[1].sampling.repetition_penalty = 0.8f;
  params[2].sampling.frequency_penalty = 0.7f;
  params[3].sampling.presence_penalty = 1.1f;
  params[4].sampling.repetition_penalty = 1.2f;
  params[4].sampling.frequency_penalty = -0.5f;
  params[4].sampling.presence_penalty = 0.4f;
  EngineConfig config;
  config.scheduler.max_num_batched_tokens = 48;  // chunked prefills beside decodes
  testing::CpuEngine reference_cpu(*model_, *backend_, *tokenizer_, config);
  Engine& reference = reference_cpu.engine;
  const Outcome want = run(reference, prompts, params);

  testing::SamplingExecutor executor(*model_, *backend_, num_blocks());
  Engine engine(executor, *tokenizer_, config);
  const Outcome got = run(engine, prompts, params);

  EXPECT_EQ(got.tokens, want.tokens);
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(got.samples[i].size(), want.samples[i].size()) << "request " << i;
    for (size_t t = 0; t < got.samples[i].size(); ++t) {
      EXPECT_NEAR(got.samples[i][t].logprob, want.samples[i][t].logprob, 1e-4) << "request " << i << " token " << t;
    }
  }
  EXPECT_EQ(executor.host_rows_steps, 0);
  EXPECT_GT(executor.sample_steps, 0);
  EXPECT_GT(executor.penalized_rows, 0);
  EXPECT_EQ(engine.metrics().num_device_sampled_steps, executor.sample_steps);
}

// Temperature, top-k, top-p, min-p and penalties, seeded or not: every step on the executor.
TEST_F(EngineDeviceSamplingTest, RandomAndPenalizedRowsGoThroughTheExecutor) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestParams> params;
  for (int i = 0; i < 6; ++i) {
    prompts.push_back(slice(97 * i, 10 + 13 * i));
    params.push_back(greedy(10));
    params.back().sampling.temperature = 0.7f + 0.1f * static_cast<float>(i);
    params.back().sampling.logprobs = i % 2 == 0 ? 0 : -1;
  }
  params[0].sampling.top_k = 20;
  params[1].sampling.top_p = 0.9f;
  params[1].sampling.seed = 3;
  params[2].sampling.min_p = 0.05f;
  params[3].sampling.repetition_penalty = 1.1f;
  params[3].sampling.seed = 42;
  params[4].sampling.frequency_penalty = 0.5f;
  params[4].sampling.presence_penalty = 0.5f;
  params[5].n = 3;  // the fork step samples on the host; the siblings then on the executor
  params[5].sampling.seed = 9;
  testing::SamplingExecutor executor(*model_, *backend_, num_blocks());
  Engine engine(executor, *tokenizer_, EngineConfig{});
  const Outcome got = run(engine, prompts, params);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got.tokens[i].size(), static_cast<size_t>(i == 5 ? 30 : 10)) << "request " << i;
    for (int32_t token : got.tokens[i]) EXPECT_TRUE(token >= 0 && token < model_->config().vocab_size);
    for (const SampleResult& s : got.samples[i]) {
      EXPECT_TRUE(std::isfinite(s.logprob));
      EXPECT_LE(s.logprob, 0.0f);
    }
  }
  EXPECT_GT(executor.sample_steps, 0);
  EXPECT_GT(executor.random_rows, 0);
  EXPECT_GT(executor.penalized_rows, 0);
  EXPECT_EQ(executor.host_rows_steps, 1);  // only the n = 3 request's fork
  EXPECT_EQ(engine.metrics().num_device_sampled_steps, executor.sample_steps);
}

// A row asking for top logprobs needs the logits on the host: its steps fall back to the
// Sampler (for every row of the step); the other steps stay on the executor.
TEST_F(EngineDeviceSamplingTest, TopLogprobRowsFallBackToTheSampler) {
  std::vector<std::vector<int32_t>> prompts = {slice(0, 30), slice(300, 25)};
  std::vector<RequestParams> params = {greedy(4), greedy(12)};
  params[0].sampling.logprobs = 3;
  params[0].sampling.repetition_penalty = 1.2f;
  params[1].sampling.temperature = 0.8f;
  params[1].sampling.seed = 11;
  testing::CpuEngine reference_cpu(*model_, *backend_, *tokenizer_, EngineConfig{});
  Engine& reference = reference_cpu.engine;
  const Outcome want = run(reference, prompts, params);

  testing::SamplingExecutor executor(*model_, *backend_, num_blocks());
  Engine engine(executor, *tokenizer_, EngineConfig{});
  const Outcome got = run(engine, prompts, params);
  EXPECT_EQ(got.tokens[0], want.tokens[0]);
  ASSERT_EQ(got.samples[0].size(), want.samples[0].size());
  for (size_t t = 0; t < got.samples[0].size(); ++t) {
    EXPECT_EQ(got.samples[0][t].top_logprobs, want.samples[0][t].top_logprobs);
    EXPECT_EQ(got.samples[0][t].top_logprobs.size(), 3u);
  }
  EXPECT_EQ(got.tokens[1].size(), 12u);
  EXPECT_EQ(executor.host_rows_steps, 4);  // the steps where request 0 samples
  EXPECT_EQ(executor.sample_steps, 8);     // request 1's last 8, alone
}

// A seeded request's tokens depend on its seed and logits only: the same alone, again alone,
// and in a batch of 8 beside other (seeded, unseeded, penalized) requests. Unseeded requests
// get a seed each: two of them with the same prompt in one batch differ.
TEST_F(EngineDeviceSamplingTest, SeededRowsAreReproducibleAcrossBatchCompositions) {
  RequestParams seeded = greedy(16);
  seeded.sampling.temperature = 0.8f;
  seeded.sampling.top_p = 0.9f;
  seeded.sampling.repetition_penalty = 1.1f;
  seeded.sampling.seed = 42;
  const std::vector<int32_t> prompt = slice(500, 24);
  auto alone = [&]() {
    testing::SamplingExecutor executor(*model_, *backend_, num_blocks());
    Engine engine(executor, *tokenizer_, EngineConfig{});
    const Outcome out = run(engine, {prompt}, {seeded});
    EXPECT_EQ(executor.host_rows_steps, 0);
    return out.tokens[0];
  };
  const std::vector<int32_t> first = alone();
  EXPECT_EQ(first.size(), 16u);
  EXPECT_EQ(alone(), first);

  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestParams> params;
  for (int i = 0; i < 8; ++i) {
    prompts.push_back(slice(61 * i, 8 + 9 * i));
    params.push_back(greedy(6 + 3 * i));
    params.back().sampling.temperature = 1.0f;
    params.back().sampling.top_k = 50;
    if (i % 3 == 0) params.back().sampling.seed = 100 + i;
    if (i % 2 == 0) params.back().sampling.presence_penalty = 0.5f;
  }
  prompts[3] = prompt;  // the seeded request lands in row 3 (and rows shift as others end)
  params[3] = seeded;
  prompts[5] = prompts[6] = slice(700, 20);  // two unseeded twins
  params[5] = params[6] = greedy(16);
  params[5].sampling.temperature = params[6].sampling.temperature = 1.5f;
  testing::SamplingExecutor executor(*model_, *backend_, num_blocks());
  Engine engine(executor, *tokenizer_, EngineConfig{});
  const Outcome batched = run(engine, prompts, params);
  EXPECT_EQ(batched.tokens[3], first);
  EXPECT_NE(batched.tokens[5], batched.tokens[6]);
  EXPECT_EQ(executor.host_rows_steps, 0);
}

}  // namespace
}  // namespace folio
