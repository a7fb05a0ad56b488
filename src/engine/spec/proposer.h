// Where speculative tokens come from. Each step, before scheduling, the engine hands the
// proposer the running requests that are decoding and how many tokens each may get; the
// proposer writes its guesses (and, when it drew them from a distribution, that distribution)
// into the request's Speculation. A draft model (draft_model_proposer.h) and n-gram lookup
// (ngram_proposer.h) are the two kinds today; an EAGLE-style head over the target's hidden
// states would be a third behind the same interface.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"
#include "engine/request.h"

namespace folio {

struct ProposalSlot {
  Request* request = nullptr;
  int32_t max_tokens = 0;  // >= 1; the proposer may give fewer, or none
};

class Proposer {
 public:
  virtual ~Proposer() = default;

  virtual std::string name() const = 0;
  // Proposing runs forward passes (a draft model), which the controller's cost model counts.
  virtual bool runs_forward_passes() const { return false; }
  // Fills slot.request->speculation.draft_tokens (and draft_probs, one per token, when the
  // tokens were sampled from a distribution other than a point mass).
  virtual void propose(std::span<const ProposalSlot> slots) = 0;
  // The request left the running set (finished, aborted, preempted): whatever the proposer holds
  // for it (a draft model's KV blocks) goes.
  virtual void release(RequestId id) { (void)id; }
  // Seconds spent proposing since construction (the draft model's forward passes), for the
  // speculation controller's cost model.
  virtual double seconds() const { return 0.0; }
  // The proposer's own bookkeeping (a draft model's KV manager) is consistent; and how many
  // blocks it holds (0 once every request is released).
  virtual Status check_invariants() const { return Status::ok(); }
  virtual int32_t num_used_blocks() const { return 0; }
};

}  // namespace folio
