#include "engine/beam_group.h"

#include <algorithm>

#include "engine/beam_search.h"

namespace folio {

void BeamGroups::add(RequestId id, Request* first_beam) {
  groups_[id] = BeamGroup{first_beam->shared_params, first_beam->num_prompt_tokens, {first_beam}, {}};
}

void BeamGroups::score(Request& beam, std::span<const float> logits) {
  if (beam.beam_pending) return;
  beam.beam_candidates = top_logprobs(logits, 2 * beam.params().beam_width);
  beam.beam_pending = true;
}

int64_t BeamGroups::advance_ready(const BeamActions& actions, std::vector<RequestOutput>& outputs) {
  int64_t generated = 0;
  for (auto it = groups_.begin(); it != groups_.end();) {
    BeamGroup& group = it->second;
    const bool ready = !group.live.empty() && std::all_of(group.live.begin(), group.live.end(),
                                                          [](const Request* b) { return b->beam_pending; });
    if (ready) {
      generated += advance(group, actions, outputs);
      if (done(group)) finish_group(it->first, group, actions, outputs);
    }
    it = group.live.empty() ? groups_.erase(it) : std::next(it);
  }
  return generated;
}

bool BeamGroups::done(const BeamGroup& group) const {
  const RequestParams& params = *group.params;
  const int32_t width = params.beam_width;
  if (group.live.empty()) return true;
  if (static_cast<int32_t>(group.ended.size()) < width) return false;
  if (params.early_stopping) return true;
  // Hugging Face's heuristic: stop when the best live beam, scored at its current length,
  // cannot beat the worst of the best `width` ended hypotheses.
  std::vector<double> scores;
  for (const BeamHypothesis& h : group.ended) scores.push_back(h.score);
  std::sort(scores.rbegin(), scores.rend());
  double best_live = -1e300;
  for (const Request* beam : group.live) {
    best_live = std::max(best_live, beam_score(beam->cum_logprob, beam->num_output_tokens(), params.length_penalty));
  }
  return best_live <= scores[width - 1];
}

int64_t BeamGroups::advance(BeamGroup& group, const BeamActions& actions, std::vector<RequestOutput>& outputs) {
  (void)outputs;
  const RequestParams& params = *group.params;
  for (Request* beam : group.live) beam->forked = true;  // the group now has its beams
  std::vector<BeamCandidate> candidates, next, ended;
  for (size_t b = 0; b < group.live.size(); ++b) {
    for (const auto& [token, logprob] : group.live[b]->beam_candidates) {
      candidates.push_back({static_cast<int32_t>(b), token, group.live[b]->cum_logprob + logprob});
    }
  }
  auto is_end = [&](int32_t token) { return actions.is_end(params, token); };
  select_beams(std::move(candidates), params.beam_width, is_end, next, ended);
  auto output_of = [](const Request& beam) { return std::vector<int32_t>(beam.output().begin(), beam.output().end()); };
  for (const BeamCandidate& c : ended) {
    BeamHypothesis h{output_of(*group.live[c.beam]), c.cum_logprob, 0.0, FinishReason::kStop};
    h.tokens.push_back(c.token);
    h.score = beam_score(h.cum_logprob, static_cast<int32_t>(h.tokens.size()), params.length_penalty);
    group.ended.push_back(std::move(h));
  }
  // Forks first, from the beams as they are; then every chosen beam takes its token.
  std::vector<Request*> chosen;
  std::vector<bool> reused(group.live.size(), false);
  for (const BeamCandidate& c : next) {
    Request* beam = group.live[c.beam];
    chosen.push_back(reused[c.beam] ? &actions.fork(*beam) : beam);
    reused[c.beam] = true;
  }
  for (size_t b = 0; b < group.live.size(); ++b) {
    if (!reused[b]) actions.finish(*group.live[b], FinishReason::kNone);  // pruned
  }
  group.live.clear();
  for (size_t i = 0; i < chosen.size(); ++i) {
    Request& beam = *chosen[i];
    beam.tokens.push_back(next[i].token);
    beam.cum_logprob = next[i].cum_logprob;
    beam.beam_pending = false;
    const int32_t length = beam.num_output_tokens();
    if (length >= params.max_tokens || beam.num_tokens() >= max_model_len_) {
      group.ended.push_back({output_of(beam), beam.cum_logprob,
                             beam_score(beam.cum_logprob, length, params.length_penalty), FinishReason::kLength});
      actions.finish(beam, FinishReason::kLength);
    } else {
      group.live.push_back(&beam);
    }
  }
  return static_cast<int64_t>(chosen.size());
}

void BeamGroups::finish_group(RequestId id, BeamGroup& group, const BeamActions& actions,
                              std::vector<RequestOutput>& outputs) {
  const RequestParams& params = *group.params;
  for (Request* beam : group.live) {
    group.ended.push_back({std::vector<int32_t>(beam->output().begin(), beam->output().end()), beam->cum_logprob,
                           beam_score(beam->cum_logprob, beam->num_output_tokens(), params.length_penalty),
                           FinishReason::kLength});
    actions.finish(*beam, FinishReason::kLength);
  }
  group.live.clear();
  std::stable_sort(group.ended.begin(), group.ended.end(),
                   [](const BeamHypothesis& a, const BeamHypothesis& b) { return a.score > b.score; });
  const int32_t width = params.beam_width;
  for (int32_t rank = 0; rank < std::min<int32_t>(width, static_cast<int32_t>(group.ended.size())); ++rank) {
    const BeamHypothesis& h = group.ended[static_cast<size_t>(rank)];
    RequestOutput out;
    out.id = id;
    out.index = rank;
    out.new_tokens = h.tokens;
    // As a stream would show it: the tokens continue the prompt (no start-of-text space
    // removal), and the text is valid UTF-8.
    IncrementalDetokenizer text(tokenizer_, /*skip_special=*/true);
    for (const int32_t token : h.tokens) out.text_delta += text.push(token);
    out.text_delta += text.flush();
    out.finished = true;
    out.finish_reason = h.reason;
    out.num_prompt_tokens = group.num_prompt_tokens;
    out.num_output_tokens = static_cast<int32_t>(h.tokens.size());
    outputs.push_back(std::move(out));
  }
}

}  // namespace folio
