#include "engine/beam_search.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace folio {

std::vector<std::pair<int32_t, double>> top_logprobs(std::span<const float> logits, int32_t k) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max_logit);
  const double log_sum = std::log(sum) + max_logit;
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  k = std::min<int32_t>(k, static_cast<int32_t>(ids.size()));
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  std::vector<std::pair<int32_t, double>> top;
  for (int32_t i = 0; i < k; ++i) top.emplace_back(ids[i], static_cast<double>(logits[ids[i]]) - log_sum);
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
