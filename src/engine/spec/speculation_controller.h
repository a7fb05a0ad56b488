// How many tokens to propose this step, per request, so that speculation pays: the expected
// tokens a step emits over what the step costs, both measured.
//
// A request whose proposals are accepted at rate a emits E(a, k) = 1 + a + ... + a^k tokens per
// step with k proposals (Leviathan et al.), if acceptances were independent. The step costs
// the target's forward pass over N0 + sum(k_i) tokens, plus k passes of the draft model over
// the B decoding requests. Both costs are tables of measured seconds by token count (moving
// averages, half-octave buckets, interpolated): a GPU's pass costs nearly the same for 1 or 64
// tokens and then grows, a CPU's grows almost at once, and neither is known before it is seen.
// Each step the controller picks the k in [0, K] that maximizes sum_i E(a_i, k_i) / cost, with
// k_i = min(k, what request i may take, and no proposal whose chance to be used, a^j, is below
// 10%). At saturation every extra token costs its share of a compute-bound pass and k falls to
// 0: the step is the same as without speculation. A cost never measured is assumed as low as
// it plausibly can be (flat above what was measured, proportional below), so that the
// controller tries it and measures it; a bucket not refreshed for a while counts as
// never measured, so a choice that stopped paying is re-examined (at most one step in
// kRecheckSteps).
//
// Tokens never depend on k (verifier.h): greedy and seeded requests give the same tokens with
// any k, and unseeded ones the same distribution.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace folio {

// Measured seconds by token count.
class CostTable {
 public:
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
};

struct SpeculationCandidate {
  double acceptance = 0.6;  // the request's moving average
  int32_t max_tokens = 0;   // what it may take (context, max_tokens, the configured k)
};

class SpeculationController {
 public:
  // max_tokens: --num-speculative-tokens. adaptive false: always that many (capped per request).
  // proposer_costs: proposals take forward passes (a draft model), which the cost counts.
  SpeculationController(int32_t max_tokens, bool adaptive, bool proposer_costs);

  // k_i for each candidate (written to ks), given the tokens the step runs besides the
  // candidates' proposals (their decode tokens included).
  void choose(std::span<const SpeculationCandidate> candidates, int32_t base_tokens, std::vector<int32_t>& ks);
  // After the step: the target's forward pass over num_tokens took seconds; the proposer's
  // num_passes passes over num_rows requests took proposer_seconds.
  void observe(int32_t num_tokens, double seconds, int32_t num_rows, int32_t num_passes, double proposer_seconds);

  int32_t max_tokens() const { return max_tokens_; }
  int32_t last_k() const { return last_k_; }

  static constexpr int64_t kRecheckSteps = 256;
  static constexpr double kMinUseChance = 0.1;
  // E(a, k) = 1 + a + ... + a^k.
  static double expected_tokens(double acceptance, int32_t k);
  // The most proposals worth making at this acceptance: a^j >= kMinUseChance.
  static int32_t useful_tokens(double acceptance, int32_t max_tokens);

 private:
  int32_t max_tokens_;
  bool adaptive_;
  bool proposer_costs_;
  CostTable target_;
  CostTable proposer_;  // one draft pass, by rows
  int64_t step_ = 1;
  int32_t last_k_ = 0;
};

}  // namespace folio
