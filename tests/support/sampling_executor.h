// The CPU executor plus sampling of its own (Capabilities::samples_on_device), for engine tests
// of executor-side sampling on machines without a GPU.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_executor.h"
#include "engine/sampling_params.h"
#include "executor/executor.h"
#include "model/model_weights.h"

namespace folio::testing {

// The CPU executor plus sampling of its own (Capabilities::samples_on_device), standing in for
// the GPU's sample_tokens kernel: penalties from the engine's (token, count) lists, in the
// Sampler's float operations; greedy argmax; else temperature, top-k, top-p, min-p and a draw
// whose uniform number is a hash of (seed, offset) alone, so a row's token depends only on its
// logits and its random stream. Logprobs are raw, in double.
class SamplingExecutor final : public Executor {
 public:
  SamplingExecutor(const ModelWeights& model, cpu::CpuBackend& backend, int32_t num_blocks)
      : inner_(model, backend, num_blocks, 16, 0) {}

  const ModelConfig& config() const override { return inner_.config(); }
  KvPoolLayout kv_pool() const override { return inner_.kv_pool(); }
  Capabilities capabilities() const override {
    Capabilities caps = inner_.capabilities();
    caps.samples_on_device = true;
    return caps;
  }
  StepResult execute(const ForwardBatch& batch, const SamplingPlan* plan) override {
    const StepResult result = inner_.execute(batch, nullptr);
    if (batch.logit_rows.empty()) return result;
    if (plan == nullptr) {
      ++host_rows_steps;
      return result;
    }
    ++sample_steps;
    EXPECT_EQ(plan->rows.size(), batch.logit_rows.size());
    EXPECT_EQ(plan->penalty_tokens.size(), plan->penalty_counts.size());
    const std::span<const float> logits = result.logits;
    const size_t vocab = static_cast<size_t>(config().vocab_size);
    samples_.clear();
    bool all_greedy = true;
    for (size_t row = 0; row < batch.logit_rows.size(); ++row) {
      const RowSampling& p = plan->rows[row];
      all_greedy = all_greedy && p.is_greedy() && !p.has_penalties();
      const std::span<const float> raw = logits.subspan(row * vocab, vocab);
      work_.assign(raw.begin(), raw.end());
      std::vector<int32_t> seen;
      for (int32_t e = p.penalty_begin; e < p.penalty_end; ++e) {
        const int32_t token = plan->penalty_tokens[static_cast<size_t>(e)];
        const int32_t count = plan->penalty_counts[static_cast<size_t>(e)];
        EXPECT_TRUE(token >= 0 && static_cast<size_t>(token) < vocab);
        EXPECT_GE(count, 0);
        seen.push_back(token);
        float& logit = work_[static_cast<size_t>(token)];
        if (p.repetition_penalty != 1.0f) {
          logit = logit > 0.0f ? logit / p.repetition_penalty : logit * p.repetition_penalty;
        }
        if (count > 0) {
          logit -= p.frequency_penalty * static_cast<float>(count);
          logit -= p.presence_penalty;
        }
      }
      std::sort(seen.begin(), seen.end());
      EXPECT_TRUE(std::adjacent_find(seen.begin(), seen.end()) == seen.end()) << "a token twice in one row";
      if (p.penalty_end > p.penalty_begin) ++penalized_rows;
      if (p.temperature >= SamplingParams::kGreedyTemperature) ++random_rows;
      const int32_t token = p.temperature < SamplingParams::kGreedyTemperature ? argmax(work_) : draw(p);
      float max_value = -INFINITY;
      for (float x : raw) max_value = std::fmax(max_value, x);
      double sum = 0.0;
      for (float x : raw) {
        if (x == x) sum += std::exp(static_cast<double>(x) - max_value);
      }
      samples_.push_back({token, static_cast<float>(raw[static_cast<size_t>(token)] - (max_value + std::log(sum)))});
    }
    if (all_greedy) ++greedy_steps;
    return StepResult{{}, samples_};
  }

  int64_t sample_steps = 0;
  int64_t greedy_steps = 0;  // sampled steps whose rows were all plain greedy
  int64_t host_rows_steps = 0;
  int64_t penalized_rows = 0;
  int64_t random_rows = 0;

 private:
  static int32_t argmax(const std::vector<float>& x) {
    int32_t best = 0;
    float best_value = -INFINITY;
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i] > best_value) {
        best_value = x[i];
        best = static_cast<int32_t>(i);
      }
    }
    return best;
  }
  static uint64_t mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }
  // Sorted by scaled logit, descending (ties: lower id first), then the truncations, then an
  // inverse-CDF draw with u = hash(seed, offset).
  int32_t draw(const RowSampling& p) {
    const size_t vocab = work_.size();
    std::vector<int32_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::vector<double> scaled(vocab);
    for (size_t i = 0; i < vocab; ++i) scaled[i] = static_cast<double>(work_[i]) / p.temperature;
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return scaled[a] > scaled[b]; });
    size_t keep = vocab;
    if (p.top_k > 0 && static_cast<size_t>(p.top_k) < vocab) {
      keep = static_cast<size_t>(p.top_k);
      while (keep < vocab && scaled[order[keep]] == scaled[order[keep - 1]]) ++keep;
    }
    const double top = scaled[order[0]];
    std::vector<double> w(keep);
    double total = 0.0;
    for (size_t i = 0; i < keep; ++i) total += (w[i] = std::exp(scaled[order[i]] - top));
    if (p.top_p < 1.0f) {
      double above = 0.0;
      size_t i = 0;
      while (i < keep && above < p.top_p * total) above += w[i++];
      keep = std::max<size_t>(i, 1);
    }
    if (p.min_p > 0.0f) {
      size_t i = 1;
      while (i < keep && w[i] >= p.min_p * w[0]) ++i;
      keep = i;
    }
    total = 0.0;
    for (size_t i = 0; i < keep; ++i) total += w[i];
    const double u = static_cast<double>(mix(p.seed ^ mix(p.offset)) >> 11) * 0x1.0p-53 * total;
    double acc = 0.0;
    for (size_t i = 0; i < keep; ++i) {
      acc += w[i];
      if (u < acc) return order[i];
    }
    return order[keep - 1];
  }

  cpu::CpuExecutor inner_;
  std::vector<float> work_;
  std::vector<SampledToken> samples_;
};

}  // namespace folio::testing
