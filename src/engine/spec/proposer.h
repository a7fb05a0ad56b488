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
#include "executor/executor.h"  // ModelConfig

namespace folio {

// What the last propose() cost, for the controller's cost model: the first pass (each request's
// catch-up on tokens the proposer has not seen, ending in its first proposal) and the passes
// after it (one token per request).
struct ProposerTiming {
  int32_t catchup_tokens = 0;
  double catchup_seconds = 0.0;
  int32_t passes = 0;  // after the first
  int32_t rows = 0;    // requests in those passes (the first of them)
  double pass_seconds = 0.0;
};

struct ProposalSlot {
  Request* request = nullptr;
  int32_t max_tokens = 0;  // >= 1; the proposer may give fewer, or none
};

class Proposer {
 public:
  virtual ~Proposer() = default;

  virtual std::string name() const = 0;
  // Fills slot.request->speculation.draft_tokens (and draft_probs, one per token, when the
  // tokens were sampled from a distribution other than a point mass).
  virtual void propose(std::span<const ProposalSlot> slots) = 0;
  // The request left the running set (finished, aborted, preempted): whatever the proposer holds
  // for it (a draft model's KV blocks) goes.
  virtual void release(RequestId id) { (void)id; }
  // Seconds spent proposing since construction (the draft model's forward passes).
  virtual double seconds() const { return 0.0; }
  virtual ProposerTiming last_timing() const { return {}; }
  // A forward pass of the proposer over N tokens against one of the target over N tokens, as
  // the ratio of the matrix products' multiply-adds (0: proposing runs no forward pass). The
  // controller's cost model starts from it until the proposer's passes are measured.
  virtual double relative_cost(const ModelConfig& target) const {
    (void)target;
    return 0.0;
  }
  // Tokens of the request the proposer must still read before it can propose (a draft model
  // that has not seen the prompt, or has not run since some steps): its first pass feeds them.
  virtual int32_t backlog(const Request& request) const {
    (void)request;
    return 0;
  }
  // The proposer's own bookkeeping (a draft model's KV manager) is consistent; and how many
  // blocks it holds (0 once every request is released).
  virtual Status check_invariants() const { return Status::ok(); }
  virtual int32_t num_used_blocks() const { return 0; }
};

}  // namespace folio
