// Beam search's bookkeeping over the engine's sequences: each request with beam_width > 1 is a
// group of live beams (sequences sharing blocks copy-on-write) and ended hypotheses. Every live
// beam is scored (its top 2B log-probs) when its step samples; once all are scored the group
// advances together: the best B candidates, forks for beams chosen twice, pruned beams finished;
// Hugging Face's length penalty and stopping heuristic; results at the end, best first.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "engine/output_processor.h"
#include "engine/request.h"

namespace folio {

struct BeamHypothesis {
  std::vector<int32_t> tokens;
  double cum_logprob = 0.0;
  double score = 0.0;
  FinishReason reason = FinishReason::kNone;
};

// The live beams and ended hypotheses of one beam-search request.
struct BeamGroup {
  std::shared_ptr<const RequestParams> params;
  int32_t num_prompt_tokens = 0;
  std::vector<Request*> live;
  std::vector<BeamHypothesis> ended;
};

// What a group needs from the engine to move on.
struct BeamActions {
  std::function<Request&(Request& parent)> fork;            // a new beam continuing parent
  std::function<void(Request& beam, FinishReason)> finish;  // a beam leaves the running set
  std::function<bool(const RequestParams&, int32_t token)> is_end;
};

class BeamGroups {
 public:
  BeamGroups(const Tokenizer& tokenizer, int32_t max_model_len)
      : tokenizer_(tokenizer), max_model_len_(max_model_len) {}

  void add(RequestId id, Request* first_beam);
  void erase(RequestId id) { groups_.erase(id); }
  bool empty() const { return groups_.empty(); }

  // A beam's logits of this step: kept as its candidates until its group advances.
  static void score(Request& beam, std::span<const float> logits);

  // Moves every group whose live beams are all scored; a group can become ready in a step that
  // ran nothing (its last beam was swapped back in, say). Finished groups give their results
  // (best first, index = rank) and leave. Returns the tokens the beams took.
  int64_t advance_ready(const BeamActions& actions, std::vector<RequestOutput>& outputs);

 private:
  int64_t advance(BeamGroup& group, const BeamActions& actions, std::vector<RequestOutput>& outputs);
  bool done(const BeamGroup& group) const;
  void finish_group(RequestId id, BeamGroup& group, const BeamActions& actions, std::vector<RequestOutput>& outputs);

  const Tokenizer& tokenizer_;
  int32_t max_model_len_;
  std::map<RequestId, BeamGroup> groups_;
};

}  // namespace folio
