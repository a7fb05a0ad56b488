// Which of a step's tokens the executor samples itself. When the executor can sample on its
// device and every sampling chunk of the step is one it serves as the host Sampler would (no top
// logprobs, no beam scoring, no n > 1 request still to fork, all of which need the logit rows on
// the host), the planner writes the step's SamplingPlan: one RowSampling per sampling chunk and
// the penalty entries of every row. Otherwise there is no plan and the executor returns logits.
//
// A chunk with k proposals gets k + 1 rows, row j drawing at the stream offset decoding without
// speculation would use for that token (its step + j) with the proposals before it counted by
// the penalties: sampling then comparing (the verifier's verify_chosen) then gives the tokens
// plain decoding gives. That is exact for every request; the planner leaves to the host only
// what needs rejection sampling there: an unseeded request's draft-model proposals (their
// draft distribution accepts more) and seeded ones when rejection sampling was asked for.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/scheduler_output.h"
#include "executor/sampling_plan.h"

namespace folio {

class SamplingPlanner {
 public:
  // seeded_same_tokens: seeded rows with proposals are verified by sampling then comparing
  // (SeededVerification::kSameTokens, engine/spec/verifier.h), which the device can do.
  SamplingPlanner(bool executor_samples, int32_t vocab_size, bool seeded_same_tokens = true);

  // The plan for this step, valid until the next call; null: the host samples this step.
  const SamplingPlan* plan(const SchedulerOutput& output);

  // The seed of a request's random stream on the executor: its own (plus its sample index),
  // else one drawn for the engine at start and mixed with the request's id.
  uint64_t device_seed(const Request& request) const;

 private:
  // Penalty entries of the request's output, prompt and `proposals` (counted as output: the
  // proposals before a verification row are output for that row).
  void add_penalties(const Request& request, std::span<const int32_t> proposals, RowSampling& row);

  bool executor_samples_;
  bool seeded_same_tokens_;
  int32_t vocab_size_;
  uint64_t random_base_ = 0;
  SamplingPlan plan_;
  // Per-token scratch for the penalty lists: -1 unseen; back to -1 after every row.
  std::vector<int32_t> token_counts_;  // (vocab)
  std::vector<int32_t> touched_;
};

}  // namespace folio
