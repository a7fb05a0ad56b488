#include "engine/sampling_planner.h"

#include <random>

#include "core/splitmix64.h"

namespace folio {

SamplingPlanner::SamplingPlanner(bool executor_samples, int32_t vocab_size, bool seeded_same_tokens)
    : executor_samples_(executor_samples), seeded_same_tokens_(seeded_same_tokens), vocab_size_(vocab_size) {
  std::random_device device;
  random_base_ = (static_cast<uint64_t>(device()) << 32) ^ static_cast<uint64_t>(device());
}

uint64_t SamplingPlanner::device_seed(const Request& request) const {
  if (const std::optional<uint64_t> seed = request.seed()) return *seed;
  return splitmix64(random_base_ ^ splitmix64(static_cast<uint64_t>(request.id)));
}

void SamplingPlanner::add_penalties(const Request& request, std::span<const int32_t> proposals, RowSampling& row) {
  const SamplingParams& sampling = request.params().sampling;
  const bool repetition = sampling.repetition_penalty != 1.0f;
  if (!repetition && sampling.frequency_penalty == 0.0f && sampling.presence_penalty == 0.0f) return;
  // One entry per distinct token: its output count, or 0 for prompt-only (repetition only).
  if (token_counts_.size() != static_cast<size_t>(vocab_size_))
    token_counts_.assign(static_cast<size_t>(vocab_size_), -1);
  auto note = [&](int32_t token, int32_t add) {
    if (token < 0 || token >= vocab_size_) return;
    int32_t& count = token_counts_[static_cast<size_t>(token)];
    if (count < 0) {
      count = 0;
      touched_.push_back(token);
    }
    count += add;
  };
  for (int32_t token : request.output()) note(token, 1);
  for (int32_t token : proposals) note(token, 1);
  if (repetition) {
    for (int32_t token : request.prompt()) note(token, 0);
  }
  for (int32_t token : touched_) {
    plan_.penalty_tokens.push_back(token);
    plan_.penalty_counts.push_back(token_counts_[static_cast<size_t>(token)]);
    token_counts_[static_cast<size_t>(token)] = -1;
  }
  touched_.clear();
}

const SamplingPlan* SamplingPlanner::plan(const SchedulerOutput& output) {
  if (!executor_samples_) return nullptr;
  plan_.clear();
  for (const ScheduledChunk& chunk : output.chunks) {
    if (!chunk.samples) continue;
    const Request& request = *chunk.request;
    const RequestParams& params = request.params();
    const SamplingParams& sampling = params.sampling;
    if (params.beam_width != 1 || (params.n > 1 && !request.forked) || sampling.logprobs > 0) return nullptr;
    if (chunk.num_draft_tokens > 0 && !sampling.is_greedy()) {
      const bool compare = request.seed().has_value() ? seeded_same_tokens_ : request.speculation.draft_probs.empty();
      if (!compare) return nullptr;
    }
    RowSampling row;
    row.temperature = sampling.temperature;
    row.top_k = sampling.top_k;
    row.top_p = sampling.top_p;
    row.min_p = sampling.min_p;
    row.repetition_penalty = sampling.repetition_penalty;
    row.frequency_penalty = sampling.frequency_penalty;
    row.presence_penalty = sampling.presence_penalty;
    row.seed = device_seed(request);
    const std::span<const int32_t> proposals = request.speculation.draft_tokens;
    for (int32_t j = 0; j <= chunk.num_draft_tokens; ++j) {
      row.offset = static_cast<uint64_t>(request.num_output_tokens() + j);
      row.penalty_begin = static_cast<int32_t>(plan_.penalty_tokens.size());
      add_penalties(request, proposals.first(static_cast<size_t>(j)), row);
      row.penalty_end = static_cast<int32_t>(plan_.penalty_tokens.size());
      plan_.rows.push_back(row);
    }
  }
  return plan_.rows.empty() ? nullptr : &plan_;
}

}  // namespace folio
