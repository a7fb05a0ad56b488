// Sampling checks. Greedy must equal the CPU Sampler token for token (same penalties, same tie
// rule) with the same raw logprob (atol 1e-4: float64 vs float log-sum-exp). Random sampling
// draws from another stream than the CPU, so it is checked as a distribution: many rows with
// the same logits and different seeds; every drawn token must be in the support the CPU rules
// give (host float64 model of sampler.cpp, itself cross-checked against CPU Sampler draws),
// the total variation distance to the exact distribution must be within sampling noise, and
// a second run with the same seeds must give the same tokens.
#include <algorithm>
#include <cmath>
#include <map>

#include "backend/cuda/kernels/kernels.h"
#include "check_util.h"
#include "engine/sampler.h"

namespace folio::cuda::check {
namespace {

RowSampling device_params(const SamplingParams& s, uint64_t seed, uint64_t offset) {
  RowSampling p;
  p.temperature = s.temperature;
  p.top_k = s.top_k;
  p.top_p = s.top_p;
  p.min_p = s.min_p;
  p.repetition_penalty = s.repetition_penalty;
  p.frequency_penalty = s.frequency_penalty;
  p.presence_penalty = s.presence_penalty;
  p.seed = seed;
  p.offset = offset;
  return p;
}

struct GpuSampleResult {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  double ms = 0.0;
};

// Runs sample_tokens on a copy of the logits. penalties[r] = (prompt, output) token lists.
GpuSampleResult run_gpu(const std::vector<float>& logits, int32_t vocab, std::vector<RowSampling> params,
                        const std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>>& penalties) {
  const int32_t rows = static_cast<int32_t>(params.size());
  std::vector<int32_t> entry_tokens, entry_counts;
  for (int32_t r = 0; r < rows; ++r) {
    params[r].penalty_begin = static_cast<int32_t>(entry_tokens.size());
    if (r < static_cast<int32_t>(penalties.size())) {
      std::map<int32_t, int32_t> counts;
      for (int32_t t : penalties[r].second) ++counts[t];
      for (int32_t t : penalties[r].first) counts.emplace(t, 0);
      for (const auto& [t, c] : counts) {
        entry_tokens.push_back(t);
        entry_counts.push_back(c);
      }
    }
    params[r].penalty_end = static_cast<int32_t>(entry_tokens.size());
  }
  DeviceBuffer<float> d_logits(logits);
  DeviceBuffer<RowSampling> d_params(params);
  DeviceBuffer<int32_t> d_entry_tokens(entry_tokens), d_entry_counts(entry_counts);
  DeviceBuffer<float> d_scratch(std::max<size_t>(entry_tokens.size(), 1));
  DeviceBuffer<int32_t> d_tokens(rows);
  DeviceBuffer<float> d_logprobs(rows);
  d_tokens.poison();
  d_logprobs.poison();
  SampleArgs args;
  args.logits = d_logits.get();
  args.rows = rows;
  args.vocab = vocab;
  args.params = d_params.get();
  args.penalty_tokens = d_entry_tokens.get();
  args.penalty_counts = d_entry_counts.get();
  args.penalty_scratch = d_scratch.get();
  args.out_tokens = d_tokens.get();
  args.out_logprobs = d_logprobs.get();
  GpuSampleResult result;
  result.ms = time_ms([&] { sample_tokens(args, nullptr); }, 0, 1);
  sync_or_die("sample_tokens");
  result.tokens = d_tokens.download();
  result.logprobs = d_logprobs.download();
  return result;
}

void check_greedy(const Options& opt, std::mt19937_64& rng) {
  for (int32_t vocab : {1000, 49152, 128256}) {
    const int32_t rows = opt.quick ? 8 : 37;
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> logits(static_cast<size_t>(rows) * vocab);
    for (float& x : logits) x = normal(rng);
    std::vector<RowSampling> params;
    std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> penalties;
    std::vector<SamplingParams> cpu_params;
    std::uniform_int_distribution<int32_t> any_token(0, vocab - 1);
    for (int32_t r = 0; r < rows; ++r) {
      float* row = &logits[static_cast<size_t>(r) * vocab];
      if (r % 3 == 1)
        for (int32_t i = 0; i < vocab; ++i) row[i] = std::round(row[i]);  // many ties
      if (r % 5 == 2) {
        row[any_token(rng)] = NAN;
        row[0] = NAN;
      }
      if (r % 7 == 3) {
        const int32_t a = any_token(rng), b = std::min(a + 3, vocab - 1);
        row[a] = row[b] = 50.0f;
      }
      SamplingParams s;
      s.temperature = 0.0f;
      s.logprobs = 0;
      if (r % 2 == 0) {
        s.repetition_penalty = 1.3f;
        s.frequency_penalty = 0.4f;
        s.presence_penalty = 0.7f;
      }
      std::vector<int32_t> prompt(20 + r), output(r * 3);
      for (int32_t& t : prompt) t = any_token(rng);
      for (int32_t& t : output) t = any_token(rng) % 50;  // repeats
      // Make the penalties matter: push some penalized tokens to the top.
      for (int i = 0; i < 3 && !output.empty(); ++i) row[output[i]] = 60.0f + i;
      penalties.push_back({prompt, output});
      cpu_params.push_back(s);
      params.push_back(device_params(s, 0, 0));
    }
    const GpuSampleResult gpu = run_gpu(logits, vocab, params, penalties);
    std::vector<double> got_tokens, ref_tokens, got_lp, ref_lp;
    for (int32_t r = 0; r < rows; ++r) {
      Sampler sampler(cpu_params[r]);
      SamplerScratch scratch;
      const std::span<const float> row(&logits[static_cast<size_t>(r) * vocab], vocab);
      const SampleResult ref = sampler.sample(row, penalties[r].first, penalties[r].second, scratch);
      got_tokens.push_back(gpu.tokens[r]);
      ref_tokens.push_back(ref.token);
      got_lp.push_back(gpu.logprobs[r]);
      ref_lp.push_back(ref.logprob);
    }
    const std::string shape = "rows=" + std::to_string(rows) + " vocab=" + std::to_string(vocab);
    report(outcome_of("sample.greedy.token", shape, got_tokens, ref_tokens, 0.0, 0.0, gpu.ms));
    report(outcome_of("sample.greedy.logprob", shape, got_lp, ref_lp, 1e-4, 1e-5));
  }
}

// Exact distribution under sampler.cpp's rules (float64), zero outside the support.
std::vector<double> expected_distribution(const std::vector<float>& logits, const SamplingParams& s) {
  const size_t vocab = logits.size();
  std::vector<float> scaled(vocab);
  for (size_t i = 0; i < vocab; ++i) scaled[i] = logits[i] == logits[i] ? logits[i] / s.temperature : -INFINITY;
  const float m = *std::max_element(scaled.begin(), scaled.end());
  std::vector<double> w(vocab);
  for (size_t i = 0; i < vocab; ++i) w[i] = std::exp(static_cast<double>(scaled[i]) - m);
  std::vector<char> keep(vocab, 1);
  for (size_t i = 0; i < vocab; ++i) keep[i] = w[i] > 0.0;
  if (s.top_k > 0 && static_cast<size_t>(s.top_k) < vocab) {
    std::vector<float> sorted = scaled;
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    const float kth = sorted[s.top_k - 1];
    for (size_t i = 0; i < vocab; ++i) keep[i] = keep[i] && scaled[i] >= kth;
  }
  if (s.top_p < 1.0f) {
    std::vector<int32_t> order;
    double total = 0.0;
    for (size_t i = 0; i < vocab; ++i)
      if (keep[i]) {
        order.push_back(static_cast<int32_t>(i));
        total += w[i];
      }
    std::sort(order.begin(), order.end(),
              [&](int32_t a, int32_t b) { return scaled[a] > scaled[b] || (scaled[a] == scaled[b] && a < b); });
    const double target = static_cast<double>(s.top_p) * total;
    double above = 0.0;
    for (size_t j = 0; j < order.size(); ++j) {
      if (j > 0 && above >= target) keep[order[j]] = 0;
      above += w[order[j]];
    }
  }
  if (s.min_p > 0.0f)
    for (size_t i = 0; i < vocab; ++i) keep[i] = keep[i] && w[i] >= s.min_p;
  std::vector<double> prob(vocab, 0.0);
  double sum = 0.0;
  for (size_t i = 0; i < vocab; ++i)
    if (keep[i]) sum += w[i];
  for (size_t i = 0; i < vocab; ++i)
    if (keep[i]) prob[i] = w[i] / sum;
  return prob;
}

void check_distribution(const Options& opt, std::mt19937_64& rng) {
  struct Config {
    const char* name;
    float t;
    int k;
    float p;
    float min_p;
    float round_to;
  };
  const Config configs[] = {{"plain", 1.0f, -1, 1.0f, 0.0f, 0.0f},     {"top_k", 0.7f, 10, 1.0f, 0.0f, 0.0f},
                            {"top_p", 1.0f, -1, 0.8f, 0.0f, 0.0f},     {"min_p", 1.0f, -1, 1.0f, 0.1f, 0.0f},
                            {"all", 1.3f, 50, 0.9f, 0.05f, 0.0f},      {"top_p_ties", 1.0f, -1, 0.5f, 0.0f, 0.5f},
                            {"top_k_ties", 1.0f, 7, 1.0f, 0.0f, 1.0f}, {"top_p_tiny", 1.0f, -1, 0.01f, 0.0f, 0.0f}};
  const int32_t vocab = 300;
  const int32_t rows = opt.quick ? 4000 : 20000;
  for (const Config& c : configs) {
    std::normal_distribution<float> normal(0.0f, 2.0f);
    std::vector<float> row(vocab);
    for (float& x : row) x = c.round_to > 0 ? std::round(normal(rng) / c.round_to) * c.round_to : normal(rng);
    SamplingParams s;
    s.temperature = c.t;
    s.top_k = c.k;
    s.top_p = c.p;
    s.min_p = c.min_p;
    const std::vector<double> expected = expected_distribution(row, s);
    std::vector<float> logits;
    std::vector<RowSampling> params;
    for (int32_t r = 0; r < rows; ++r) {
      logits.insert(logits.end(), row.begin(), row.end());
      params.push_back(device_params(s, 1000 + r, 7));
    }
    const GpuSampleResult first = run_gpu(logits, vocab, params, {});
    const GpuSampleResult second = run_gpu(logits, vocab, params, {});
    std::vector<double> counts(vocab, 0.0);
    int outside = 0, invalid = 0;
    for (int32_t t : first.tokens) {
      if (t < 0 || t >= vocab) {
        ++invalid;
        continue;
      }
      counts[t] += 1.0;
      if (expected[t] == 0.0) ++outside;
    }
    double tv = 0.0;
    int support = 0;
    for (int32_t i = 0; i < vocab; ++i) {
      tv += std::fabs(counts[i] / rows - expected[i]);
      support += expected[i] > 0.0;
    }
    tv *= 0.5;
    const double bound = 1.5 * std::sqrt(static_cast<double>(support) / rows) + 0.005;
    // The host model agrees with the CPU sampler's support.
    int cpu_outside = 0;
    for (int i = 0; i < 2000; ++i) {
      SamplingParams seeded = s;
      seeded.seed = 77 + i;
      Sampler sampler(seeded);
      SamplerScratch scratch;
      const SampleResult r = sampler.sample(row, {}, {}, scratch);
      cpu_outside += expected[r.token] == 0.0;
    }
    const bool deterministic = first.tokens == second.tokens;
    char note[256];
    std::snprintf(note, sizeof note,
                  "support=%d tv=%.4f (bound %.4f) outside=%d invalid=%d cpu_outside=%d deterministic=%d", support, tv,
                  bound, outside, invalid, cpu_outside, deterministic ? 1 : 0);
    report_flag(std::string("sample.dist.") + c.name,
                "rows=" + std::to_string(rows) + " vocab=" + std::to_string(vocab),
                outside == 0 && invalid == 0 && cpu_outside == 0 && tv <= bound && deterministic, note, first.ms);
  }
}

Register r1("sample.greedy", check_greedy);
Register r2("sample.distribution", check_distribution);

}  // namespace
}  // namespace folio::cuda::check
