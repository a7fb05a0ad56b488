// Exact acceptance of one proposed token (Leviathan, Kalman and Matias 2023; Chen et al. 2023):
// a token x proposed from q is kept with probability min(1, p(x) / q(x)); when it is not, the
// replacement is drawn from the normalized residual max(p - q, 0). Whatever q is, the kept-or-
// replaced token is distributed exactly as p. A proposal without a distribution (n-gram lookup)
// is a point mass on x: kept with probability p(x), replaced from p with x removed.
//
// p and q here are the target's and the draft's processed distributions (penalties,
// temperature, top-k/p, min-p: Sampler::distribution), so the guarantee is about the
// distribution the request asked for, not the raw model.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/spec/token_distribution.h"

namespace folio {

struct AcceptDecision {
  bool accepted = false;
  int32_t token = -1;  // the proposal when accepted, else the replacement
};

class RejectionSampler {
 public:
  // q null: the proposal came without a distribution (a point mass). u_accept and u_resample
  // are two independent uniforms in [0, 1) from the request's stream.
  AcceptDecision decide(int32_t proposal, const TokenDistribution& p, const TokenDistribution* q, double u_accept,
                        double u_resample);

  // Inverse-CDF draw from d with a uniform in [0, 1) (the bonus token after an accepted run).
  static int32_t draw(const TokenDistribution& d, double u);

 private:
  std::vector<float> dense_q_;  // q by token id, zero between calls
};

}  // namespace folio
