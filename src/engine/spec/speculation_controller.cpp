#include "engine/spec/speculation_controller.h"

#include <algorithm>
#include <cmath>

namespace folio {

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
  // A fresh (or stale) bucket takes the measurement as it is; a live one moves a quarter of
  // the way: steps are noisy and contexts grow.
  const bool fresh = last_step_[b] == 0 || step - last_step_[b] > SpeculationController::kRecheckSteps;
  seconds_[b] = fresh ? seconds : 0.75 * seconds_[b] + 0.25 * seconds;
  last_step_[b] = step;
}

bool CostTable::known(int32_t num_tokens, int64_t step) const {
  const int b = bucket_of(num_tokens);
  return last_step_[b] != 0 && step - last_step_[b] <= SpeculationController::kRecheckSteps;
}

double CostTable::estimate(int32_t num_tokens, int64_t step) const {
  const int b = bucket_of(num_tokens);
  auto live = [&](int i) { return last_step_[i] != 0 && step - last_step_[i] <= SpeculationController::kRecheckSteps; };
  if (live(b)) return seconds_[b];
  int below = b - 1;
  while (below >= 0 && !live(below)) --below;
  int above = b + 1;
  while (above < kBuckets && !live(above)) ++above;
  if (below < 0 && above >= kBuckets) return -1.0;
  // Outside what was measured, the cheapest the curve can plausibly be (a pass never costs less
  // per token with fewer tokens, nor less in all with more): flat above, proportional below.
  // Optimism makes the controller try such a point and so measure it.
  if (above >= kBuckets) return seconds_[below];
  if (below < 0) return seconds_[above] * std::min(1.0, static_cast<double>(num_tokens) / tokens_of(above));
  const double x0 = tokens_of(below), x1 = tokens_of(above);
  const double w = (static_cast<double>(num_tokens) - x0) / (x1 - x0);
  return seconds_[below] + std::clamp(w, 0.0, 1.0) * (seconds_[above] - seconds_[below]);
}

SpeculationController::SpeculationController(int32_t max_tokens, bool adaptive, bool proposer_costs)
    : max_tokens_(max_tokens), adaptive_(adaptive), proposer_costs_(proposer_costs) {}

double SpeculationController::expected_tokens(double acceptance, int32_t k) {
  double total = 0.0, term = 1.0;
  for (int32_t j = 0; j <= k; ++j, term *= acceptance) total += term;
  return total;
}

int32_t SpeculationController::useful_tokens(double acceptance, int32_t max_tokens) {
  int32_t k = 0;
  for (double chance = acceptance; k < max_tokens && chance >= kMinUseChance; chance *= acceptance) ++k;
  return k;
}

void SpeculationController::choose(std::span<const SpeculationCandidate> candidates, int32_t base_tokens,
                                   std::vector<int32_t>& ks) {
  ks.assign(candidates.size(), 0);
  ++step_;
  std::vector<int32_t> caps(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    const int32_t limit = std::min(candidates[i].max_tokens, max_tokens_);
    caps[i] = adaptive_ ? useful_tokens(candidates[i].acceptance, limit) : limit;
    if (!adaptive_) ks[i] = caps[i];
  }
  if (!adaptive_) {
    last_k_ = max_tokens_;
    return;
  }
  const int32_t rows = static_cast<int32_t>(candidates.size());
  auto cost = [&](int32_t k, int32_t extra_tokens) -> double {
    double t = target_.estimate(base_tokens + extra_tokens, step_);
    if (t < 0) return -1.0;
    if (proposer_costs_ && k > 0) {
      const double pass = proposer_.estimate(rows, step_);
      if (pass < 0) return -1.0;
      t += k * pass;
    }
    return t;
  };
  int32_t best_k = 0;
  double best_rate = -1.0;
  bool explore = false;
  for (int32_t k = 0; k <= max_tokens_; ++k) {
    double tokens = 0.0;
    int32_t extra = 0;
    for (size_t i = 0; i < candidates.size(); ++i) {
      const int32_t ki = std::min(k, caps[i]);
      tokens += expected_tokens(candidates[i].acceptance, ki);
      extra += ki;
    }
    if (k > 0 && extra == 0) break;  // nobody can take more
    const double t = cost(k, extra);
    if (t < 0) {
      // Never measured: try it (optimism), the largest such k first, so the table fills.
      best_k = k;
      explore = true;
      continue;
    }
    if (explore) continue;
    const double rate = tokens / t;
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
}

void SpeculationController::observe(int32_t num_tokens, double seconds, int32_t num_rows, int32_t num_passes,
                                    double proposer_seconds) {
  if (num_tokens > 0) target_.observe(num_tokens, seconds, step_);
  if (num_passes > 0 && num_rows > 0) proposer_.observe(num_rows, proposer_seconds / num_passes, step_);
}

}  // namespace folio
