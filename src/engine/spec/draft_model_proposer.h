// A smaller model sharing the target's vocabulary guesses the next tokens: each step it catches
// up on the request's tokens it has not seen (the prompt the first time, then the one or two
// tokens the last verification added), then runs one token at a time for the proposals, all
// requests of the step batched in each forward pass. Its K/V live in its own executor's pool
// under its own KvCacheManager (prefix caching on, so n > 1 siblings and shared prompts share
// draft blocks too); after verification the rejected proposals' slots are truncated away the
// next time the request is seen. A preempted or finished request's draft blocks are freed
// (release), and it catches up from the prefix cache when it runs again.
//
// Proposals are drawn with the request's own sampling settings from the draft's logits
// (Sampler::distribution: penalties, temperature, top-k/p, min-p), from a stream of the draft's
// own seeded like the request's, and carry the distribution q they were drawn from, which the
// rejection sampler needs. Greedy requests propose the draft's (penalized) argmax.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/sampler.h"
#include "engine/spec/proposer.h"
#include "executor/executor.h"
#include "kv/kv_cache_manager.h"

namespace folio {

class DraftModelProposer final : public Proposer {
 public:
  // The draft executor (its own model and KV pool) must outlive the proposer. max_batch_tokens
  // bounds one catch-up pass (a long prompt catches up over several steps, proposing nothing
  // meanwhile).
  DraftModelProposer(Executor& draft, int32_t max_batch_tokens = 2048);

  // The draft can propose for this target: same vocabulary size (the caller compares the
  // tokenizers' tokens too).
  static Status check_compatible(const ModelConfig& target, const ModelConfig& draft);

  std::string name() const override { return "draft model"; }
  void propose(std::span<const ProposalSlot> slots) override;
  void release(RequestId id) override;
  double seconds() const override { return seconds_; }
  ProposerTiming last_timing() const override { return timing_; }
  int32_t backlog(const Request& request) const override;
  double relative_cost(const ModelConfig& target) const override;
  Status check_invariants() const override;
  int32_t num_used_blocks() const override { return kv_.metrics().num_used_blocks; }

 private:
  struct State {
    std::vector<int32_t> fed;  // tokens whose K/V are in the draft's cache, from position 0
    int32_t verified = 0;      // leading entries of fed known to equal the request's tokens
    std::unique_ptr<Sampler> sampler;
  };
  struct Pass {
    Request* request;
    State* state;
    int32_t first_position;
    std::vector<int32_t> tokens;
    bool wants_logits;
  };

  State& state_of(Request& request);
  // Truncates the draft's K/V to the longest prefix it shares with the request's tokens.
  void resync(Request& request, State& state);
  // Runs one forward pass over the draft executor; the logits of the passes that want them, in
  // order. Its seconds go to *seconds.
  std::span<const float> run(std::vector<Pass>& passes, double* seconds);
  // Draws the next proposal from one row of draft logits.
  void draw(Request& request, State& state, std::span<const float> logits);

  Executor& draft_;
  int32_t max_batch_tokens_;
  KvCacheManager kv_;
  std::unordered_map<RequestId, State> states_;
  ForwardBatch batch_;
  SamplerScratch scratch_;
  std::vector<int32_t> output_scratch_;
  double seconds_ = 0.0;
  ProposerTiming timing_;
};

}  // namespace folio
