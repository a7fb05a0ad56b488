#include "engine/sampler.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>

namespace folio {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kPosInf = std::numeric_limits<float>::infinity();

// Seeds from std::random_device when the request brings no seed, so unseeded requests differ.
uint64_t pick_seed(const std::optional<uint64_t>& seed) {
  if (seed) return *seed;
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

// exp(x) for x <= 0 (weights relative to the max logit), about 2e-7 relative error: range
// reduction to 2^n * exp(r), |r| <= ln2/2, and Cephes' degree-6 polynomial. Branch-free so
// that loops over 150k logits vectorize; several times faster than libm's expf.
inline float exp_nonpositive(float x) {
  // Below -87 the result is no normal float: the result is 0 there, and for -inf and NaN.
  // The clamp is a bit select and the zeroing a multiply by 0/1: branches (std::max
  // included) would stop GCC from vectorizing the loops that call this.
  constexpr float kLowest = -87.0f;
  // Two comparisons rather than one bool used twice: a shared bool defeats GCC 12's vectorizer.
  const float keep = static_cast<float>(x >= kLowest);
  const uint32_t mask = 0u - static_cast<uint32_t>(x >= kLowest);
  uint32_t x_bits, lowest_bits;
  std::memcpy(&x_bits, &x, sizeof x);
  std::memcpy(&lowest_bits, &kLowest, sizeof kLowest);
  const uint32_t clamped_bits = (x_bits & mask) | (lowest_bits & ~mask);
  float clamped;
  std::memcpy(&clamped, &clamped_bits, sizeof clamped);
  // Round to nearest by truncating t - 0.5 (t <= 0): std::nearbyint is a libm call on
  // baseline x86-64 and would cost more than the rest of the function.
  const int32_t exponent = static_cast<int32_t>(clamped * 1.44269504088896341f - 0.5f);
  const float n = static_cast<float>(exponent);
  const float r = (clamped - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(exponent + 127) << 23;
  float two_to_n;
  std::memcpy(&two_to_n, &bits, sizeof two_to_n);
  return y * two_to_n * keep;
}

// Reductions written with independent lanes: IEEE order rules keep the compiler from
// vectorizing a single running sum or max, but not these.
constexpr size_t kLanes = 8;

float max_of(std::span<const float> values) {  // NaN never wins
  float lanes[kLanes];
  std::fill(lanes, lanes + kLanes, kNegInf);
  size_t i = 0;
  for (; i + kLanes <= values.size(); i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) lanes[j] = values[i + j] > lanes[j] ? values[i + j] : lanes[j];
  }
  float best = *std::max_element(lanes, lanes + kLanes);
  for (; i < values.size(); ++i) best = values[i] > best ? values[i] : best;
  return best;
}

double sum_of(std::span<const float> values) {  // float64 accumulation
  double lanes[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= values.size(); i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) lanes[j] += values[i + j];
  }
  double total = 0.0;
  for (double lane : lanes) total += lane;
  for (; i < values.size(); ++i) total += values[i];
  return total;
}

// weights[i] = exp(logits[i] - max_logit); vectorizes.
void exp_relative(std::span<const float> logits, float max_logit, std::vector<float>& weights) {
  weights.resize(logits.size());
  float* out = weights.data();
  const float* in = logits.data();
  for (size_t i = 0; i < logits.size(); ++i) out[i] = exp_nonpositive(in[i] - max_logit);
}

// Argmax with ties to the lowest id; NaN never wins.
int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  float best_value = kNegInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > best_value) {
      best_value = logits[i];
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

}  // namespace

Sampler::Sampler(const SamplingParams& params, std::optional<uint64_t> seed) : params_(params), rng_(pick_seed(seed)) {
  assert(params_.validate().is_ok());
}

double Sampler::next_uniform() {
  // 53 random bits -> a double in [0, 1). Written out rather than std::uniform_real_distribution
  // so that a seed gives the same tokens with every standard library.
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

void Sampler::apply_penalties(std::span<float> logits, std::span<const int32_t> prompt_tokens,
                              std::span<const int32_t> output_tokens, SamplerScratch& scratch) const {
  std::vector<uint8_t>& seen = scratch.seen;
  std::vector<int32_t>& output_counts = scratch.output_counts;
  std::vector<int32_t>& touched = scratch.touched;
  const bool repetition = params_.repetition_penalty != 1.0f;
  const bool output_penalties = params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f;
  if (!repetition && !output_penalties) return;

  const size_t vocab = logits.size();
  if (seen.size() < vocab) {
    seen.resize(vocab, 0);
    output_counts.resize(vocab, 0);
  }
  // Only the touched entries are visited and reset, so a step costs O(prompt + output), not
  // O(vocab), and each distinct token is penalized once however often it occurs.
  touched.clear();
  auto touch = [&](int32_t token) {
    if (!seen[token]) {
      seen[token] = 1;
      touched.push_back(token);
    }
  };
  for (int32_t token : output_tokens) {
    if (token < 0 || static_cast<size_t>(token) >= vocab) continue;
    touch(token);
    ++output_counts[token];
  }
  if (repetition) {
    for (int32_t token : prompt_tokens) {
      if (token < 0 || static_cast<size_t>(token) >= vocab) continue;
      touch(token);
    }
  }

  for (int32_t token : touched) {
    float& logit = logits[token];
    if (repetition) {
      // vLLM: `logits > 0` is divided, everything else (including 0) multiplied.
      logit = logit > 0.0f ? logit / params_.repetition_penalty : logit * params_.repetition_penalty;
    }
    const int32_t count = output_counts[token];
    if (count > 0) {
      logit -= params_.frequency_penalty * static_cast<float>(count);
      logit -= params_.presence_penalty;
    }
    seen[token] = 0;
    output_counts[token] = 0;
  }
}

SampleResult Sampler::sample(std::span<const float> logits, std::span<const int32_t> prompt_tokens,
                             std::span<const int32_t> output_tokens, SamplerScratch& scratch) {
  assert(!logits.empty());
  std::vector<float>& work = scratch.work;
  work.assign(logits.begin(), logits.end());
  apply_penalties(work, prompt_tokens, output_tokens, scratch);

  SampleResult result;
  if (params_.is_greedy()) {
    result.token = argmax(work);
  } else {
    const float temperature = params_.temperature;
    for (float& logit : work) {
      // Division, not multiplication by 1/T, to round like vLLM. NaN (logit != logit) is
      // masked out here so that the orderings below stay strict weak orderings.
      logit = logit == logit ? logit / temperature : kNegInf;
    }
    result.token = sample_from_distribution(work, scratch);
  }

  if (params_.logprobs >= 0) {
    fill_logprobs(logits, result, scratch);
  } else {
    result.logprob = std::numeric_limits<float>::quiet_NaN();
  }
  return result;
}

int32_t Sampler::select_candidates(std::span<const float> scaled_logits, float max_logit,
                                   SamplerScratch& scratch) const {
  using Candidate = SamplerScratch::Candidate;
  std::vector<float>& weights = scratch.weights;
  std::vector<Candidate>& candidates = scratch.candidates;
  const size_t vocab = scaled_logits.size();
  const bool top_k = params_.top_k > 0 && static_cast<size_t>(params_.top_k) < vocab;
  const bool top_p = params_.top_p < 1.0f;
  const bool min_p = params_.min_p > 0.0f;
  // Candidates: tokens at or above the k-th largest logit (top-k), else every token whose
  // weight did not underflow (more than 87 nats below the top carries no probability).
  auto collect = [&](float logit_threshold, float min_weight) {
    candidates.clear();
    for (size_t i = 0; i < vocab; ++i) {
      if (scaled_logits[i] >= logit_threshold && weights[i] >= min_weight && weights[i] > 0.0f) {
        candidates.push_back({scaled_logits[i], static_cast<int32_t>(i), weights[i]});
      }
    }
  };
  if (top_k) {
    collect(kth_largest(scaled_logits, scratch), 0.0f);
    if (top_p) {
      double total = 0.0;  // top-p renormalizes over the top-k survivors
      for (const Candidate& c : candidates) total += c.weight;
      keep_top_p(max_logit, total, scratch);
    }
  } else if (top_p) {
    // Top-p alone. Real distributions put nearly all their mass on a few tokens, so first
    // collect only tokens within 1e-4 of the top: if they already hold top_p of the mass,
    // every token below ranks under all of them with at least that much mass above it, so
    // none can be in the nucleus. Otherwise fall back to every token.
    const double total = sum_of(weights);
    constexpr float kProbeWeight = 1e-4f;
    collect(kNegInf, kProbeWeight);
    double probed = 0.0;
    for (const Candidate& c : candidates) probed += c.weight;
    if (probed < static_cast<double>(params_.top_p) * total) collect(kNegInf, 0.0f);
    keep_top_p(max_logit, total, scratch);
  } else {
    collect(kNegInf, 0.0f);  // plain sampling (the distribution's view of it; sampling skips this)
  }
  if (min_p) {
    // After top-p, which must see the full mass first (see the header on why min-p's place
    // in the order does not matter otherwise).
    std::erase_if(candidates, [&](const Candidate& c) { return c.weight < params_.min_p; });
  }
  // The most likely token survives every cut; should rounding ever leave none, the argmax is
  // the answer rather than an out-of-range draw.
  return candidates.empty() ? argmax(scaled_logits) : -1;
}

int32_t Sampler::sample_from_distribution(std::span<const float> scaled_logits, SamplerScratch& scratch) {
  using Candidate = SamplerScratch::Candidate;
  std::vector<float>& weights = scratch.weights;
  std::vector<Candidate>& candidates = scratch.candidates;
  const float max_logit = max_of(scaled_logits);
  // Everything masked: nothing to draw. A logit that overflowed to +inf (a tiny repetition
  // penalty or temperature dividing a large one) holds all the probability: the distribution's
  // limit is that token (the lowest id of several), as the GPU's sampler picks it too.
  if (max_logit == kNegInf || max_logit == kPosInf) return argmax(scaled_logits);

  const size_t vocab = scaled_logits.size();
  exp_relative(scaled_logits, max_logit, weights);
  if (!(params_.top_k > 0 && static_cast<size_t>(params_.top_k) < vocab) && !(params_.top_p < 1.0f)) {
    // Plain sampling, maybe with min-p: draw straight from the weight array, no sorting.
    if (params_.min_p > 0.0f) {
      const float cut = params_.min_p;
      for (float& w : weights) w = w >= cut ? w : 0.0f;
    }
    const double target = next_uniform() * sum_of(weights);
    double cumulative = 0.0;
    int32_t last_nonzero = 0;
    for (size_t i = 0; i < vocab; ++i) {
      if (weights[i] == 0.0f) continue;
      cumulative += weights[i];
      last_nonzero = static_cast<int32_t>(i);
      if (cumulative > target) return last_nonzero;
    }
    return last_nonzero;  // rounding left target at the very top
  }
  if (const int32_t only = select_candidates(scaled_logits, max_logit, scratch); only >= 0) return only;
  double total = 0.0;
  for (const Candidate& c : candidates) total += c.weight;
  const double target = next_uniform() * total;
  double cumulative = 0.0;
  for (const Candidate& c : candidates) {
    cumulative += c.weight;
    if (cumulative > target) return c.token;
  }
  return candidates.back().token;  // rounding left target at the very top
}

void Sampler::distribution(std::span<const float> logits, std::span<const int32_t> prompt_tokens,
                           std::span<const int32_t> output_tokens, SamplerScratch& scratch,
                           TokenDistribution& out) const {
  assert(!logits.empty());
  out.clear();
  std::vector<float>& work = scratch.work;
  work.assign(logits.begin(), logits.end());
  apply_penalties(work, prompt_tokens, output_tokens, scratch);
  if (params_.is_greedy()) {
    out.add(argmax(work), 1.0f);
    return;
  }
  for (float& logit : work) logit = logit == logit ? logit / params_.temperature : kNegInf;  // as sample()
  const float max_logit = max_of(work);
  if (max_logit == kNegInf || max_logit == kPosInf) {
    out.add(argmax(work), 1.0f);
    return;
  }
  exp_relative(work, max_logit, scratch.weights);
  if (const int32_t only = select_candidates(work, max_logit, scratch); only >= 0) {
    out.add(only, 1.0f);
    return;
  }
  double total = 0.0;
  for (const SamplerScratch::Candidate& c : scratch.candidates) total += c.weight;
  for (const SamplerScratch::Candidate& c : scratch.candidates) {
    out.add(c.token, static_cast<float>(c.weight / total));
  }
}

SampleResult Sampler::result_for(std::span<const float> logits, int32_t token, SamplerScratch& scratch) const {
  SampleResult result;
  result.token = token;
  if (params_.logprobs >= 0) {
    fill_logprobs(logits, result, scratch);
  } else {
    result.logprob = std::numeric_limits<float>::quiet_NaN();
  }
  return result;
}

float Sampler::kth_largest(std::span<const float> scaled_logits, SamplerScratch& scratch) const {
  std::vector<float>& selection = scratch.select;
  // Every token at or above the k-th largest value stays, so ties at the boundary are all
  // kept (vLLM compares against the k-th value the same way).
  const size_t k = static_cast<size_t>(params_.top_k);
  selection.clear();
  if (k * 16 <= scaled_logits.size()) {
    // Small k: a min-heap of the k largest; most logits are rejected by one comparison.
    for (float logit : scaled_logits) {
      if (selection.size() < k) {
        selection.push_back(logit);
        std::push_heap(selection.begin(), selection.end(), std::greater<float>());
      } else if (logit > selection.front()) {
        std::pop_heap(selection.begin(), selection.end(), std::greater<float>());
        selection.back() = logit;
        std::push_heap(selection.begin(), selection.end(), std::greater<float>());
      }
    }
    return selection.front();
  }
  selection.assign(scaled_logits.begin(), scaled_logits.end());
  std::nth_element(selection.begin(), selection.begin() + static_cast<ptrdiff_t>(k - 1), selection.end(),
                   std::greater<float>());
  return selection[k - 1];
}

void Sampler::keep_top_p(float max_logit, double total, SamplerScratch& scratch) const {
  using Candidate = SamplerScratch::Candidate;
  std::vector<Candidate>& candidates = scratch.candidates;
  std::vector<double>& bucket_mass = scratch.bucket_mass;
  // Instead of sorting, bucket the candidates by logit (bucket 0 holds the largest) and sum
  // each bucket's mass. Walking buckets from the top finds the one bucket where the mass
  // above crosses top_p: every bucket above it is kept whole, every bucket below dropped,
  // and only that boundary bucket is sorted. O(n) plus a sort of a few dozen tokens.
  // `total` is the mass top-p is a fraction of; the candidates may hold less of it (see the
  // probe in sample_from_distribution).
  float min_logit = max_logit;
  for (const Candidate& c : candidates) min_logit = std::min(min_logit, c.logit);
  const double target = static_cast<double>(params_.top_p) * total;
  // About one bucket per candidate, at most 4096, so small vocabularies stay cheap too.
  const int kBuckets = static_cast<int>(std::clamp<size_t>(candidates.size(), 16, 4096));
  // Buckets span at most 64 nats below the max; anything lower (weight < 1e-27) shares the
  // last bucket, which top-p can only reach when it keeps everything above it anyway.
  const float span = std::min(max_logit - min_logit, 64.0f);
  const float scale = span > 0.0f ? (kBuckets - 1) / span : 0.0f;
  // With +inf logits (a tiny repetition penalty divides a positive logit into +inf) the top
  // candidates give inf - inf = NaN here: they belong to bucket 0, and no float may reach the
  // int conversion unless it is in range (converting NaN is undefined; on x86 it gives
  // INT_MIN, an index far outside bucket_mass; found by fuzz/sampler_fuzz.cpp).
  auto bucket_of = [&](float logit) {
    const float offset = (max_logit - logit) * scale;
    if (!(offset > 0.0f)) return 0;
    return offset >= float(kBuckets - 1) ? kBuckets - 1 : static_cast<int>(offset);
  };
  bucket_mass.assign(kBuckets, 0.0);
  for (const Candidate& c : candidates) bucket_mass[bucket_of(c.logit)] += c.weight;

  int boundary = 0;
  double mass_above = 0.0;
  while (boundary < kBuckets - 1 && mass_above + bucket_mass[boundary] < target) {
    mass_above += bucket_mass[boundary];
    ++boundary;
  }
  // Move the boundary bucket's tokens to the front of the tail, sort them, and walk them.
  auto above_end = std::partition(candidates.begin(), candidates.end(),
                                  [&](const Candidate& c) { return bucket_of(c.logit) < boundary; });
  auto boundary_end =
      std::partition(above_end, candidates.end(), [&](const Candidate& c) { return bucket_of(c.logit) == boundary; });
  std::sort(above_end, boundary_end, [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.token < b.token);
  });
  auto keep_end = above_end;
  // A token stays while the mass strictly above it is below top_p, which is vLLM's "drop
  // tokens whose ascending cumulative sum is <= 1 - top_p". The most likely token always stays.
  while (keep_end != boundary_end && (keep_end == candidates.begin() || mass_above < target)) {
    mass_above += keep_end->weight;
    ++keep_end;
  }
  candidates.erase(keep_end, candidates.end());
}

void Sampler::fill_logprobs(std::span<const float> raw_logits, SampleResult& result, SamplerScratch& scratch) const {
  std::vector<float>& weights = scratch.weights;
  // Log-sum-exp over the raw logits: weights in float (2e-7 relative), summed in float64. Rows
  // that are not finite have their limits: with +inf present those tokens share the mass; with
  // only -inf and NaN every logprob is -inf.
  const float max_logit = max_of(raw_logits);
  double log_normalizer = kNegInf;
  double infinite_share = 0.0;  // -log(count of +inf logits) when max_logit is +inf
  if (max_logit == kPosInf) {
    size_t count = 0;
    for (float x : raw_logits) count += x == kPosInf;
    infinite_share = -std::log(static_cast<double>(count));
  } else if (max_logit != kNegInf) {
    exp_relative(raw_logits, max_logit, weights);
    log_normalizer = static_cast<double>(max_logit) + std::log(sum_of(weights));
  }
  auto logprob_of = [&](float raw) -> float {
    if (max_logit == kPosInf) return raw == kPosInf ? static_cast<float>(infinite_share) : kNegInf;
    if (max_logit == kNegInf || raw != raw) return kNegInf;
    return static_cast<float>(static_cast<double>(raw) - log_normalizer);
  };
  result.logprob = logprob_of(raw_logits[result.token]);

  const size_t n = static_cast<size_t>(params_.logprobs);
  if (n == 0) return;
  // A heap of the n best seen so far, the worst on top: O(vocab log n) with n <= 20, and most
  // tokens are rejected by one comparison against the top.
  using Entry = std::pair<float, int32_t>;
  auto better = [](const Entry& a, const Entry& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  std::vector<Entry> heap;
  heap.reserve(n);
  for (size_t i = 0; i < raw_logits.size(); ++i) {
    const Entry entry{raw_logits[i], static_cast<int32_t>(i)};
    if (std::isnan(entry.first)) continue;
    if (heap.size() < n) {
      heap.push_back(entry);
      std::push_heap(heap.begin(), heap.end(), better);
    } else if (better(entry, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = entry;
      std::push_heap(heap.begin(), heap.end(), better);
    }
  }
  std::sort(heap.begin(), heap.end(), better);
  result.top_logprobs.reserve(heap.size());
  for (const Entry& entry : heap) {
    result.top_logprobs.emplace_back(entry.second, logprob_of(entry.first));
  }
}

}  // namespace folio
