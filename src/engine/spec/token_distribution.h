// A normalized distribution over a few tokens of a vocabulary, as (token, probability) pairs: what
// the Sampler's processing leaves of a row of logits (engine/sampler.h), and what a draft model
// proposed a token from. Sparse because top-k/top-p leave few tokens, and a draft's rows would
// otherwise cost a vocabulary each.
#pragma once

#include <cstdint>
#include <vector>

namespace folio {

struct TokenDistribution {
  std::vector<int32_t> tokens;
  std::vector<float> probs;  // same length; sums to 1 (to rounding)

  void clear() {
    tokens.clear();
    probs.clear();
  }
  void add(int32_t token, float prob) {
    tokens.push_back(token);
    probs.push_back(prob);
  }
  bool empty() const { return tokens.empty(); }
};

}  // namespace folio
