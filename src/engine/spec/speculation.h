// A request's speculative decoding state: this step's proposals (cleared after the step that
// verified them) and the acceptance rate the controller sizes its next proposals by.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/spec/token_distribution.h"

namespace folio {

struct Speculation {
  std::vector<int32_t> draft_tokens;           // this step's proposals, in position order
  std::vector<TokenDistribution> draft_probs;  // what each was drawn from; empty: point masses
  // Per proposal position j, moving sums of its acceptances and of its tests (position j is
  // tested when the j before it were accepted), over a prior of 0.6: conditional rates, because
  // proposals are accepted in runs (an n-gram match that held for one token likely holds for the
  // next), which one rate for every position would undervalue. rates[j] = accepted / tested.
  // The same struct pools every request's tests into the proposer's rates (Engine).
  std::vector<double> accepted_sums;
  std::vector<double> tested_sums;
  std::vector<double> rates;

  // decay: how fast old evidence fades (a request's own rates: kDecay; the proposer's rates over
  // all requests, Engine's pooled prior: kPooledDecay, as they see many more tests).
  void record(int32_t proposed, int32_t accepted, double decay = kDecay) {
    if (rates.size() < static_cast<size_t>(proposed)) {
      accepted_sums.resize(static_cast<size_t>(proposed), 2.0 * kPrior);
      tested_sums.resize(static_cast<size_t>(proposed), 2.0);
      rates.resize(static_cast<size_t>(proposed), kPrior);
    }
    for (int32_t j = 0; j <= accepted && j < proposed; ++j) {
      const size_t i = static_cast<size_t>(j);
      accepted_sums[i] = decay * accepted_sums[i] + (j < accepted ? 1.0 : 0.0);
      tested_sums[i] = decay * tested_sums[i] + 1.0;
      rates[i] = accepted_sums[i] / tested_sums[i];
    }
  }
  // The prior of position j: what this proposer's proposals achieved lately across requests
  // (prior[j]), or kPrior where nothing was measured.
  static double prior_of(std::span<const double> prior, size_t j) { return j < prior.size() ? prior[j] : kPrior; }
  // A request that has not been tested yet starts from the prior, weighted as two tests.
  void start_from(std::span<const double> prior) {
    if (!rates.empty()) return;
    for (size_t j = 0; j < prior.size(); ++j) {
      accepted_sums.push_back(2.0 * prior[j]);
      tested_sums.push_back(2.0);
      rates.push_back(prior[j]);
    }
  }
  // A step the request decodes without proposals moves each position's evidence a step back
  // toward the prior: what its text did many tokens ago says less about what it does now, and a
  // request whose rates fell (a stretch of rejections) must get the chance to show that they
  // rose again; without this one bad stretch would end its speculation for good. The prior is
  // the proposer's pooled rates, not a constant: where verification is dear (a CPU), a request
  // relaxed to a middling constant would never pay for a test again, however good the
  // proposer's matches are.
  void relax(std::span<const double> prior = {}) {
    for (size_t i = 0; i < rates.size(); ++i) {
      accepted_sums[i] = kDecay * accepted_sums[i] + (1.0 - kDecay) * 2.0 * prior_of(prior, i);
      tested_sums[i] = kDecay * tested_sums[i] + (1.0 - kDecay) * 2.0;
      rates[i] = accepted_sums[i] / tested_sums[i];
    }
  }
  static constexpr double kPrior = 0.6;
  static constexpr double kDecay = 0.9;
  static constexpr double kPooledDecay = 0.99;
  void clear_drafts() {
    draft_tokens.clear();
    draft_probs.clear();
  }
};

}  // namespace folio
