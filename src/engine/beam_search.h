// Beam search's arithmetic, apart from the engine's bookkeeping: log-probabilities of a
// beam's next tokens, length-penalized scores, and the choice of the next beams.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

namespace folio {

// The k most likely next tokens and their log-probabilities (log-softmax in double of the raw
// logits), most likely first; ties go to the lower id.
std::vector<std::pair<int32_t, double>> top_logprobs(std::span<const float> logits, int32_t k);

// Hugging Face's score of a finished hypothesis: cum_logprob / length^length_penalty.
double beam_score(double cum_logprob, int32_t length, float length_penalty);

struct BeamCandidate {
  int32_t beam = 0;  // index of the live beam it extends
  int32_t token = 0;
  double cum_logprob = 0.0;  // the beam's total after this token
};

// From every live beam's top candidates, the next step's beams: the best beam_width that do not
// end the sequence (is_end(token)), in descending order; candidates that end it and rank among
// the first beam_width go to `ended`. Ties go to the lower beam index, then the lower token.
void select_beams(std::vector<BeamCandidate> candidates, int32_t beam_width, const std::function<bool(int32_t)>& is_end,
                  std::vector<BeamCandidate>& next, std::vector<BeamCandidate>& ended);

}  // namespace folio
