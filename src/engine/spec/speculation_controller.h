// How many tokens to propose this step, per request, so that speculation pays: the expected
// tokens a step emits over what the step costs, both measured.
//
// A request whose proposals are accepted at rate a emits E(a, k) = 1 + a + ... + a^k tokens per
// step with k proposals (Leviathan et al.), if acceptances were independent; they are not (an
// n-gram match that held for one token likely holds for the next), so each request's rate is
// measured per position, conditional on the positions before it, and E sums the products
// (expected_tokens). The step costs
// the target's forward pass over N0 + sum(k_i) tokens, plus k passes of the draft model over
// the B decoding requests: the first feeds each request's backlog (the tokens the draft has not
// seen: one or two in steady state; a whole prompt the first time, whose cost is spread over the
// tokens the request has left, since it is paid once), the others one token each. Until the
// draft's passes are measured, they are estimated as the target's measured passes scaled by the
// two models' multiply-adds per token, so that a draft as costly as its target is never tried;
// and no draft pass is risked before the step without proposals was measured at this load. Both costs are tables of measured seconds by token count (moving
// averages, half-octave buckets, interpolated): a GPU's pass costs nearly the same for 1 or 64
// tokens and then grows, a CPU's grows almost at once, and neither is known before it is seen.
// Each step the controller picks the k in [0, K] that maximizes sum_i E(a_i, k_i) / cost, with
// k_i = min(k, what request i may take, and no proposal whose chance to be used is below 10%). At saturation every extra token costs its share of a compute-bound pass and k falls to
// 0: the step is the same as without speculation. A cost never measured is assumed as low as
// it plausibly can be (above what was measured, flat or the slope of the two largest
// measurements if it rises; proportional below), so that the controller tries it and measures
// it; a bucket not refreshed for a while counts as never measured, so a choice that stopped
// paying is re-examined (at most one step in kRecheckSteps), and one measured only once is
// retried within kProvisionalSteps and keeps the cheaper of its first two measurements (a
// shape's first step may pay for a warm-up).
//
// Tokens never depend on k (verifier.h): greedy and seeded requests give the same tokens with
// any k, and unseeded ones the same distribution.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/spec/proposer.h"

namespace folio {

// Measured seconds by token count.
class CostTable {
 public:
  // expires: measurements older than kRecheckSteps count as never made (a target pass's cost
  // moves with the contexts; a draft's passes are stable and are measured only when used).
  // above_proportional: past the largest measurement, cost grows with the tokens (a prefill,
  // such as a draft's catch-up) rather than staying flat (a memory-bound pass).
  explicit CostTable(bool expires = true, bool above_proportional = false)
      : expires_(expires), above_proportional_(above_proportional) {}
  bool empty() const;
  void observe(int32_t num_tokens, double seconds, int64_t step);
  // Estimated seconds for num_tokens; negative when nothing near it was ever measured.
  double estimate(int32_t num_tokens, int64_t step) const;
  bool known(int32_t num_tokens, int64_t step) const;

  static int bucket_of(int32_t num_tokens);
  static int32_t tokens_of(int bucket);

 private:
  static constexpr int kBuckets = 40;  // half octaves up to 2^20 tokens
  std::array<double, kBuckets> seconds_{};
  std::array<int64_t, kBuckets> last_step_{};  // 0: never
  std::array<int32_t, kBuckets> samples_{};    // measurements since it was fresh, up to 2
  bool expires_;
  bool above_proportional_;
  bool live(int bucket, int64_t step) const;
};

struct SpeculationCandidate {
  double acceptance = 0.6;  // the conditional rate of positions `rates` does not cover
  int32_t max_tokens = 0;   // what it may take (context, max_tokens, the configured k)
  int32_t backlog = 0;      // tokens the proposer must read first (Proposer::backlog)
  int32_t remaining = 1;    // output tokens the request has left
  // rates[j]: the chance proposal j is accepted once the j before it were (Speculation::rates).
  std::span<const double> rates{};

  double rate(int32_t j) const {
    return static_cast<size_t>(j) < rates.size() ? rates[static_cast<size_t>(j)] : acceptance;
  }
};

class SpeculationController {
 public:
  // max_tokens: --num-speculative-tokens. adaptive false: always that many (capped per request).
  // proposer_cost: a proposer's forward pass against the target's over as many tokens
  // (Proposer::relative_cost; 0: proposing is free). The draft's passes are estimated from the
  // target's measured ones so scaled until they are measured themselves.
  SpeculationController(int32_t max_tokens, bool adaptive, double proposer_cost);

  // k_i for each candidate (written to ks), given the tokens the step runs besides the
  // candidates' proposals (their decode tokens included).
  void choose(std::span<const SpeculationCandidate> candidates, int32_t base_tokens, std::vector<int32_t>& ks);
  // After the step: the target's forward pass over num_tokens took seconds, and the proposer's
  // passes what proposer says.
  void observe(int32_t num_tokens, double seconds, const ProposerTiming& proposer);

  int32_t max_tokens() const { return max_tokens_; }
  int32_t last_k() const { return last_k_; }

  static constexpr int64_t kRecheckSteps = 256;
  static constexpr int64_t kProvisionalSteps = 16;  // a bucket measured once is retried this soon
  static constexpr double kMinUseChance = 0.1;
  static constexpr double kMinGain = 1.1;
  // E(k) = 1 + c_0 + ... + c_(k-1), c_j = rate(0) * ... * rate(j) the chance proposal j is used
  // (1 + a + ... + a^k at one rate a).
  static double expected_tokens(const SpeculationCandidate& candidate, int32_t k);
  // The most proposals worth making: c_(k-1) >= kMinUseChance.
  static int32_t useful_tokens(const SpeculationCandidate& candidate, int32_t max_tokens);

 private:
  int32_t max_tokens_;
  bool adaptive_;
  double proposer_cost_;
  CostTable target_;
  CostTable catchup_{false, true};  // the draft's first pass, by tokens fed
  CostTable pass_{false};           // one later draft pass, by rows
  int64_t step_ = 1;
  int32_t last_k_ = 0;
};

}  // namespace folio
