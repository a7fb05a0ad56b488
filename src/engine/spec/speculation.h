// A request's speculative decoding state: this step's proposals (cleared after the step that
// verified them) and the acceptance rate the controller sizes its next proposals by.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/spec/token_distribution.h"

namespace folio {

struct Speculation {
  std::vector<int32_t> draft_tokens;           // this step's proposals, in position order
  std::vector<TokenDistribution> draft_probs;  // what each was drawn from; empty: point masses
  // Moving sums of proposals accepted and of proposals tested (a run stops at its first
  // rejection, so a rejected run of k with a accepted tested a + 1), over a prior of 0.6.
  double accepted_sum = 1.2;
  double tested_sum = 2.0;

  // The chance that one proposal is accepted, as this request has seen it.
  double acceptance() const { return accepted_sum / tested_sum; }
  void record(int32_t proposed, int32_t accepted) {
    constexpr double kDecay = 0.9;
    accepted_sum = kDecay * accepted_sum + accepted;
    tested_sum = kDecay * tested_sum + (accepted < proposed ? accepted + 1 : accepted);
  }
  void clear_drafts() {
    draft_tokens.clear();
    draft_probs.clear();
  }
};

}  // namespace folio
