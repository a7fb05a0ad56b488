#include "engine/beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace folio {

std::vector<std::pair<int32_t, double>> top_logprobs(std::span<const float> logits, int32_t k) {
  // NaN counts as -inf (it never wins and keeps the sort's order strict); +inf logits share all
  // the mass between them; a row of nothing but -inf gives -inf everywhere.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const int32_t n = static_cast<int32_t>(logits.size());
  auto value = [&](int32_t i) -> double {
    const float l = logits[static_cast<size_t>(i)];
    return l == l ? static_cast<double>(l) : -kInf;
  };
  double max_logit = -kInf;
  for (int32_t i = 0; i < n; ++i) max_logit = std::max(max_logit, value(i));
  double log_sum = kInf;
  size_t num_infinite = 0;
  if (max_logit == kInf) {
    for (int32_t i = 0; i < n; ++i) num_infinite += value(i) == kInf;
  } else if (max_logit != -kInf) {
    double sum = 0.0;
    for (int32_t i = 0; i < n; ++i) sum += std::exp(value(i) - max_logit);
    log_sum = std::log(sum) + max_logit;
  }
  auto logprob = [&](int32_t i) {
    if (num_infinite > 0) return value(i) == kInf ? -std::log(static_cast<double>(num_infinite)) : -kInf;
    return max_logit == -kInf ? -kInf : value(i) - log_sum;
  };
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  k = std::min<int32_t>(k, n);
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](int32_t a, int32_t b) { return value(a) > value(b) || (value(a) == value(b) && a < b); });
  std::vector<std::pair<int32_t, double>> top;
  for (int32_t i = 0; i < k; ++i) top.emplace_back(ids[i], logprob(ids[i]));
  return top;
}

double beam_score(double cum_logprob, int32_t length, float length_penalty) {
  return cum_logprob / std::pow(static_cast<double>(std::max(1, length)), length_penalty);
}

void select_beams(std::vector<BeamCandidate> candidates, int32_t beam_width, const std::function<bool(int32_t)>& is_end,
                  std::vector<BeamCandidate>& next, std::vector<BeamCandidate>& ended) {
  std::stable_sort(candidates.begin(), candidates.end(), [](const BeamCandidate& a, const BeamCandidate& b) {
    if (a.cum_logprob != b.cum_logprob) return a.cum_logprob > b.cum_logprob;
    if (a.beam != b.beam) return a.beam < b.beam;
    return a.token < b.token;
  });
  next.clear();
  ended.clear();
  for (size_t rank = 0; rank < candidates.size() && static_cast<int32_t>(next.size()) < beam_width; ++rank) {
    // As in Hugging Face: an ending candidate counts only if it ranks among the first beam_width.
    if (is_end(candidates[rank].token)) {
      if (static_cast<int32_t>(rank) < beam_width) ended.push_back(candidates[rank]);
    } else {
      next.push_back(candidates[rank]);
    }
  }
}

}  // namespace folio
