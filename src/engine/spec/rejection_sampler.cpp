#include "engine/spec/rejection_sampler.h"

#include <algorithm>
#include <cassert>

namespace folio {

int32_t RejectionSampler::draw(const TokenDistribution& d, double u) {
  assert(!d.empty());
  double total = 0.0;
  for (float prob : d.probs) total += prob;
  const double target = u * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < d.tokens.size(); ++i) {
    cumulative += d.probs[i];
    if (cumulative > target) return d.tokens[i];
  }
  return d.tokens.back();  // rounding left target at the very top
}

AcceptDecision RejectionSampler::decide(int32_t proposal, const TokenDistribution& p, const TokenDistribution* q,
                                        double u_accept, double u_resample) {
  // q's probabilities by token (a point mass on the proposal when there is no q).
  int32_t max_token = proposal;
  for (int32_t t : p.tokens) max_token = std::max(max_token, t);
  if (q != nullptr) {
    for (int32_t t : q->tokens) max_token = std::max(max_token, t);
  }
  if (dense_q_.size() <= static_cast<size_t>(max_token)) dense_q_.resize(static_cast<size_t>(max_token) + 1, 0.0f);
  if (q != nullptr) {
    for (size_t i = 0; i < q->tokens.size(); ++i) dense_q_[static_cast<size_t>(q->tokens[i])] = q->probs[i];
  } else {
    dense_q_[static_cast<size_t>(proposal)] = 1.0f;
  }
  auto clear_q = [&] {
    if (q != nullptr) {
      for (int32_t t : q->tokens) dense_q_[static_cast<size_t>(t)] = 0.0f;
    } else {
      dense_q_[static_cast<size_t>(proposal)] = 0.0f;
    }
  };

  double p_x = 0.0;
  for (size_t i = 0; i < p.tokens.size(); ++i) {
    if (p.tokens[i] == proposal) p_x = p.probs[i];
  }
  const double q_x = dense_q_[static_cast<size_t>(proposal)];
  // u < p/q, written without the division; a proposal q could not have made (q_x == 0) is
  // kept only if p allows it, which no correct proposer produces.
  if (u_accept * q_x < p_x) {
    clear_q();
    return {true, proposal};
  }
  // Residual max(p - q, 0) over p's support (outside it p is 0), drawn by inverse CDF.
  double total = 0.0;
  for (size_t i = 0; i < p.tokens.size(); ++i) {
    total += std::max(0.0, static_cast<double>(p.probs[i]) - dense_q_[static_cast<size_t>(p.tokens[i])]);
  }
  AcceptDecision decision;
  if (total <= 0.0) {
    // p <= q everywhere yet rejected: only rounding gets here (p == q rejects with probability
    // 0 in exact arithmetic). p itself is the right fallback.
    decision.token = draw(p, u_resample);
  } else {
    const double target = u_resample * total;
    double cumulative = 0.0;
    for (size_t i = 0; i < p.tokens.size(); ++i) {
      const double r = std::max(0.0, static_cast<double>(p.probs[i]) - dense_q_[static_cast<size_t>(p.tokens[i])]);
      if (r <= 0.0) continue;
      cumulative += r;
      decision.token = p.tokens[i];
      if (cumulative > target) break;
    }
  }
  clear_q();
  return decision;
}

}  // namespace folio
