#include "engine/spec/speculation_controller.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace folio {
namespace {

// FOLIO_SPEC_TRACE=1: each step's choice (the cost and expected tokens of every k) and each
// step's measured time on stderr, to see why the controller chose what it chose.
bool trace_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("FOLIO_SPEC_TRACE");
    return v != nullptr && *v == '1';
  }();
  return enabled;
}

}  // namespace

int CostTable::bucket_of(int32_t num_tokens) {
  if (num_tokens <= 1) return 0;
  // Half octaves: 1, 1.41, 2, 2.83, 4, ...
  const int b = static_cast<int>(std::lround(2.0 * std::log2(static_cast<double>(num_tokens))));
  return std::min(b, kBuckets - 1);
}

int32_t CostTable::tokens_of(int bucket) {
  return static_cast<int32_t>(std::lround(std::exp2(bucket / 2.0)));
}

void CostTable::observe(int32_t num_tokens, double seconds, int64_t step) {
  const int b = bucket_of(num_tokens);
  // A fresh (or stale) bucket takes the measurement as it is; its second takes the cheaper of
  // the two (a shape's first step can pay once for a warm-up: 5.5 ms for a 0.9 ms verification
  // on the GPU); later ones move a quarter of the way: steps are noisy and contexts grow.
  // A provisional measurement (one, retried within kProvisionalSteps, whether still live or
  // just expired) is confirmed by the second; each bucket gets that one quick retry.
  if (samples_[b] == 1 && last_step_[b] != 0 && step - last_step_[b] <= 2 * SpeculationController::kProvisionalSteps) {
    seconds_[b] = std::min(seconds_[b], seconds);
    samples_[b] = 2;
  } else if (!live(b, step)) {
    seconds_[b] = seconds;
    samples_[b] = 1;
  } else {
    seconds_[b] = 0.75 * seconds_[b] + 0.25 * seconds;
  }
  last_step_[b] = step;
}

bool CostTable::live(int bucket, int64_t step) const {
  if (last_step_[bucket] == 0) return false;
  // One measurement is provisional: it is retried soon, so a warm-up that made it look dear does
  // not keep the controller away from that size for kRecheckSteps.
  const int64_t lifetime =
      samples_[bucket] == 1 ? SpeculationController::kProvisionalSteps : SpeculationController::kRecheckSteps;
  return !expires_ || step - last_step_[bucket] <= lifetime;
}

bool CostTable::empty() const {
  return std::all_of(last_step_.begin(), last_step_.end(), [](int64_t s) { return s == 0; });
}

bool CostTable::known(int32_t num_tokens, int64_t step) const {
  return live(bucket_of(num_tokens), step);
}

double CostTable::estimate(int32_t num_tokens, int64_t step) const {
  const int b = bucket_of(num_tokens);
  if (live(b, step)) return seconds_[b];
  int below = b - 1;
  while (below >= 0 && !live(below, step)) --below;
  int above = b + 1;
  while (above < kBuckets && !live(above, step)) ++above;
  if (below < 0 && above >= kBuckets) return -1.0;
  // Outside what was measured, the cheapest the curve can plausibly be (a pass never costs less
  // per token with fewer tokens, nor less in all with more): flat above, proportional below.
  // Optimism makes the controller try such a point and so measure it.
  if (above >= kBuckets) {
    if (above_proportional_) {
      return seconds_[below] * std::max(1.0, static_cast<double>(num_tokens) / tokens_of(below));
    }
    // Past the largest measurement, the slope of the two largest (never below flat): where every
    // token costs its share (a CPU, a compute-bound batch) that predicts a larger step as it will
    // be, and nothing is spent trying it; where the curve is flat so far it stays optimistic.
    int second = below - 1;
    while (second >= 0 && !live(second, step)) --second;
    if (second < 0) return seconds_[below];
    const double slope = std::max(0.0, (seconds_[below] - seconds_[second]) / (tokens_of(below) - tokens_of(second)));
    return seconds_[below] + slope * std::max(0.0, static_cast<double>(num_tokens) - tokens_of(below));
  }
  if (below < 0) return seconds_[above] * std::min(1.0, static_cast<double>(num_tokens) / tokens_of(above));
  const double x0 = tokens_of(below), x1 = tokens_of(above);
  const double w = (static_cast<double>(num_tokens) - x0) / (x1 - x0);
  return seconds_[below] + std::clamp(w, 0.0, 1.0) * (seconds_[above] - seconds_[below]);
}

SpeculationController::SpeculationController(int32_t max_tokens, bool adaptive, double proposer_cost)
    : max_tokens_(max_tokens), adaptive_(adaptive), proposer_cost_(proposer_cost) {}

double SpeculationController::expected_tokens(const SpeculationCandidate& candidate, int32_t k) {
  double total = 1.0, chance = 1.0;
  for (int32_t j = 0; j < k; ++j) total += (chance *= candidate.rate(j));
  return total;
}

int32_t SpeculationController::useful_tokens(const SpeculationCandidate& candidate, int32_t max_tokens) {
  int32_t k = 0;
  for (double chance = candidate.rate(0); k < max_tokens && chance >= kMinUseChance; chance *= candidate.rate(k)) ++k;
  return k;
}

void SpeculationController::choose(std::span<const SpeculationCandidate> candidates, int32_t base_tokens,
                                   std::vector<int32_t>& ks) {
  ks.assign(candidates.size(), 0);
  ++step_;
  std::vector<int32_t> caps(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    const int32_t limit = std::min(candidates[i].max_tokens, max_tokens_);
    caps[i] = adaptive_ ? useful_tokens(candidates[i], limit) : limit;
    if (!adaptive_) ks[i] = caps[i];
  }
  if (!adaptive_) {
    last_k_ = max_tokens_;
    return;
  }
  // A draft's passes are paid for at once, and the first a request makes reads its whole prompt:
  // they are never risked against a baseline that was not measured itself (guessed from other
  // token counts, a prefill's cost can make a step look dearer than it is).
  if (proposer_cost_ > 0 && !target_.known(base_tokens, step_)) {
    last_k_ = 0;
    return;
  }
  // The draft's passes for proposals of up to k tokens: the first over each speculating request's
  // steady backlog (at most two tokens), its backlog beyond that spread over its remaining
  // tokens, then k - 1 passes over the requests still proposing.
  // A draft pass not measured yet: the target's over as many tokens, scaled.
  auto draft = [&](const CostTable& table, int32_t tokens) {
    if (!table.empty()) return table.estimate(tokens, step_);
    const double t = target_.estimate(tokens, step_);
    return t < 0 ? -1.0 : t * proposer_cost_;
  };
  auto proposer_cost = [&](int32_t k) -> double {
    int32_t steady = 0, rows = 0;
    double spread = 0.0;
    for (size_t i = 0; i < candidates.size(); ++i) {
      const int32_t ki = std::min(k, caps[i]);
      if (ki == 0) continue;
      ++rows;
      steady += std::min(candidates[i].backlog, 2);
      if (candidates[i].backlog > 2) {
        const int32_t extra = candidates[i].backlog - 2;
        const double t = draft(catchup_, extra);
        if (t < 0) return -1.0;
        spread += t * expected_tokens(candidates[i], ki) / std::max(1, candidates[i].remaining);
      }
    }
    if (rows == 0) return 0.0;
    const double first = draft(catchup_, std::max(1, steady));
    const double later = k > 1 ? draft(pass_, rows) : 0.0;
    if (first < 0 || later < 0) return -1.0;
    return first + (k - 1) * later + spread;
  };
  auto cost = [&](int32_t k, int32_t extra_tokens) -> double {
    double t = target_.estimate(base_tokens + extra_tokens, step_);
    if (t < 0) return -1.0;
    if (proposer_cost_ > 0 && k > 0) {
      const double p = proposer_cost(k);
      if (p < 0) return -1.0;
      t += p;
    }
    return t;
  };
  int32_t best_k = 0;
  double best_rate = -1.0;
  bool explore = false;
  // Past the largest cap a larger k changes nothing.
  const int32_t max_cap = caps.empty() ? 0 : *std::max_element(caps.begin(), caps.end());
  for (int32_t k = 0; k <= max_cap; ++k) {
    double tokens = 0.0;
    int32_t extra = 0;
    for (size_t i = 0; i < candidates.size(); ++i) {
      const int32_t ki = std::min(k, caps[i]);
      tokens += expected_tokens(candidates[i], ki);
      extra += ki;
    }
    const double t = cost(k, extra);
    if (t < 0) {
      // Never measured: try it (optimism), the largest such k first, so the table fills.
      best_k = k;
      explore = true;
      continue;
    }
    if (explore) continue;
    // Proposals must promise kMinGain over none: step times are noisy, and a choice that only
    // breaks even on paper loses in practice (verification has host costs the table misses).
    const double rate = k == 0 ? tokens / t : tokens / t / kMinGain;
    if (rate > best_rate) {
      best_rate = rate;
      best_k = k;
    }
  }
  // A stale choice is re-measured once in a while: the best k's neighbours' costs move as
  // contexts grow and the batch changes.
  if (!explore && best_k == 0 && max_tokens_ > 0 && step_ % kRecheckSteps == 0) {
    int32_t extra = 0;
    for (size_t i = 0; i < candidates.size(); ++i) extra += std::min(1, caps[i]);
    if (extra > 0 && !target_.known(base_tokens + extra, step_ - kRecheckSteps / 2)) best_k = 1;
  }
  last_k_ = best_k;
  for (size_t i = 0; i < candidates.size(); ++i) ks[i] = std::min(best_k, caps[i]);
  if (trace_enabled()) {
    std::fprintf(stderr, "spec: step %lld base %d candidates %zu cap0 %d rate0 %.2f explore %d k %d |",
                 (long long)step_, base_tokens, candidates.size(), caps.empty() ? -1 : caps[0],
                 candidates.empty() ? -1.0 : candidates[0].rate(0), (int)explore, best_k);
    for (int32_t k = 0; k <= max_tokens_; ++k) {
      int32_t extra = 0;
      double tokens = 0;
      for (size_t i = 0; i < candidates.size(); ++i) {
        extra += std::min(k, caps[i]);
        tokens += expected_tokens(candidates[i], std::min(k, caps[i]));
      }
      std::fprintf(stderr, " k%d %.2f ms E %.2f", k, 1e3 * target_.estimate(base_tokens + extra, step_), tokens);
    }
    std::fprintf(stderr, "\n");
  }
}

void SpeculationController::observe(int32_t num_tokens, double seconds, const ProposerTiming& proposer) {
  if (trace_enabled()) std::fprintf(stderr, "spec: observed %d tokens in %.2f ms\n", num_tokens, 1e3 * seconds);
  if (num_tokens > 0) target_.observe(num_tokens, seconds, step_);
  if (proposer.catchup_tokens > 0) catchup_.observe(proposer.catchup_tokens, proposer.catchup_seconds, step_);
  if (proposer.passes > 0 && proposer.rows > 0)
    pass_.observe(proposer.rows, proposer.pass_seconds / proposer.passes, step_);
}

}  // namespace folio
