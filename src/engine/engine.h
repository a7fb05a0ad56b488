// The engine: requests in, per-request output streams out. One thread drives it; each step() is
//   schedule() -> execute(output) -> update(output, result)
// the scheduler deciding what runs (and owning the KV manager), the executor running it on its
// device (and sampling there when it can), update turning tokens into outputs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/beam_group.h"
#include "engine/model_runner.h"
#include "engine/output_processor.h"
#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/sampling_planner.h"
#include "engine/scheduler.h"
#include "engine/spec/proposer.h"
#include "engine/spec/speculation_controller.h"
#include "engine/spec/verifier.h"
#include "executor/executor.h"
#include "kv/kv_cache_manager.h"
#include "text/tokenizer.h"

namespace folio {

// The engine's knobs. The KV pool's size is the executor's (executor/kv_pool_sizing.h): the
// engine manages whatever blocks the executor allocated.
// Speculative decoding (engine/spec/): with a proposer given to the engine, up to num_tokens
// proposals per decoding request and step, as many as pay at the measured costs when adaptive.
struct SpeculativeConfig {
  int32_t num_tokens = 0;  // --num-speculative-tokens; 0: off
  bool adaptive = true;    // false: always num_tokens (where a request can take them)
  // Seeded sampled requests: the same tokens as without speculation (default), or rejection
  // sampling (engine/spec/verifier.h says what each gives).
  SeededVerification seeded = SeededVerification::kSameTokens;
};

struct EngineConfig {
  bool enable_prefix_caching = true;
  int32_t max_model_len = 0;  // 0: the model's trained context
  SchedulerConfig scheduler;
  SpeculativeConfig speculative;
};

// vLLM's spec_decode counters, under folio's names: proposals are "drafts" (one per request and
// step that proposed), their tokens "draft tokens", the verified ones "accepted tokens".
struct SpeculationMetrics {
  std::string proposer;  // empty: speculation off
  int64_t num_drafts = 0;
  int64_t num_draft_tokens = 0;
  int64_t num_accepted_tokens = 0;
  std::vector<int64_t> accepted_per_position;  // (num_speculative_tokens,)
  double proposer_seconds = 0.0;               // the draft model's passes
  int32_t last_num_tokens = 0;                 // the controller's latest k

  double acceptance_rate() const {
    return num_draft_tokens > 0 ? static_cast<double>(num_accepted_tokens) / num_draft_tokens : 0.0;
  }
  // Tokens a speculating request emits per step: 1 + accepted / drafts.
  double mean_acceptance_length() const {
    return num_drafts > 0 ? 1.0 + static_cast<double>(num_accepted_tokens) / num_drafts : 0.0;
  }
};

struct EngineMetrics {
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int32_t num_swapped = 0;
  int64_t num_preemptions = 0;
  int64_t num_prompt_tokens_computed = 0;  // prefill work done (prefix-cache hits excluded)
  int64_t num_generated_tokens = 0;
  // Where step() spends its time (host clock): in the executor (forward, and sampling when
  // the executor samples), and in update (host sampling, detokenizing, stop checks, beam groups).
  double execute_seconds = 0.0;
  double update_seconds = 0.0;
  int64_t num_steps = 0;
  int64_t num_device_sampled_steps = 0;  // steps whose tokens the executor chose
  KvCacheMetrics kv;
  KvFormat kv_format = KvFormat::kFp16;  // how the pool stores K/V (--kv-cache-dtype)
  double kv_bytes_per_token = 0.0;       // K and V of one token, all layers, scales included
  int32_t kv_block_size = 0;
  SpeculationMetrics speculation;
  int64_t kv_bytes_per_block = 0;  // one block id: its group's layers (kv/kv_groups.h)
  int32_t kv_num_groups = 1;       // block tables per sequence
  std::string device;              // the executor's Capabilities::device ("cuda (...), tensor parallel: ...")
};

// Result of the offline batch call.
struct Generation {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason finish_reason = FinishReason::kNone;
  double time_to_first_token_s = 0.0;
  double time_per_output_token_s = 0.0;
};

class Engine {
 public:
  // The executor (which owns the KV pool and decided its size) and the tokenizer must outlive
  // the engine; so must the proposer, when speculation is on (config.speculative.num_tokens > 0).
  Engine(Executor& executor, const Tokenizer& tokenizer, const EngineConfig& config, Proposer* proposer = nullptr);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  Expected<RequestId> add_request(std::vector<int32_t> prompt, RequestParams params);
  // Finishes the request with reason abort and frees its blocks at once; false if unknown.
  bool abort(RequestId id);
  // schedule() -> execute(output) -> update(output, result); the outputs of every request that
  // moved (and of those aborted since the last step).
  std::vector<RequestOutput> step();
  bool has_unfinished_requests() const { return scheduler_.has_work(); }
  EngineMetrics metrics() const;
  // The KV manager's invariants (every block's ref count equals the tables holding it, ...)
  // plus the engine's: every unfinished request's sequence is known to the KV manager unless
  // it waits, and no finished request holds blocks; and the proposer's (its draft KV).
  Status check_invariants() const;
  int32_t max_model_len() const { return max_model_len_; }
  int32_t num_kv_blocks() const { return kv_layout_.num_blocks; }
  int32_t max_num_seqs() const { return max_num_seqs_; }
  // Tokens one request may hold at most: the model's context, or the KV pool if it is smaller.
  int64_t context_tokens() const;

  // Runs the prompts as one continuous batch to completion (params.n must be 1).
  std::vector<Generation> generate(const std::vector<std::vector<int32_t>>& prompts, const RequestParams& params);

 private:
  // Forgets the requests finished since the last step (an aborted one reports its end here, once)
  // and asks the scheduler for this step's work.
  SchedulerOutput schedule(std::vector<RequestOutput>& outputs);
  // Speculation: the decoding requests' proposals for this step, as many as the controller
  // says pay (before scheduling, which places them where budget and blocks allow).
  void propose();
  // Runs the output on the executor, which samples it when the planner gives a plan; nothing for
  // an empty output.
  StepResult execute(const SchedulerOutput& output);
  // Speculation: how many proposals each chunk keeps, and the tokens it emits (spec_samples_).
  void verify(const SchedulerOutput& output, const StepResult& result);
  // A finished request is forgotten: its proposer state too.
  void forget(RequestId id);
  // The step's tokens (the executor's, or sampled here from its logits) appended, checked and
  // emitted; then every beam group whose beams are all scored moves on.
  void update(const SchedulerOutput& output, const StepResult& result, std::vector<RequestOutput>& outputs);
  // A chosen token: appended, checked against the stop conditions, emitted.
  RequestOutput accept_token(Request& request, const SampleResult& sample);
  // After a request's first sample: n - 1 siblings share its prompt blocks (copy-on-write) and
  // sample the same logits with their own streams.
  void fork_siblings(Request& parent, std::span<const float> logits, std::vector<RequestOutput>& outputs);
  Request& new_sequence(const Request& from, int32_t index);

  Executor& executor_;
  const Tokenizer& tokenizer_;
  KvPoolLayout kv_layout_;
  std::string device_;  // Capabilities::device, for metrics
  int32_t max_model_len_;
  int32_t max_num_seqs_;
  int32_t max_logit_rows_;
  Scheduler scheduler_;
  ModelRunner runner_;
  SamplingPlanner planner_;
  OutputProcessor processor_;
  BeamGroups beams_;
  BeamActions beam_actions_;  // its callbacks capture this: an Engine is neither copied nor moved
  SamplerScratch scratch_;    // every host-sampled row borrows it
  Proposer* proposer_ = nullptr;
  SpeculationController controller_;
  Verifier verifier_;
  std::vector<Request*> proposed_;  // requests holding proposals this step
  std::vector<SpeculationCandidate> candidates_;
  std::vector<Request*> candidate_requests_;
  std::vector<int32_t> proposal_sizes_;
  std::vector<ProposalSlot> slots_;
  std::vector<int32_t> accepted_;                        // per chunk of the step
  std::vector<std::vector<SampleResult>> spec_samples_;  // per chunk of the step
  ProposerTiming proposer_timing_;                       // this step's draft passes, for the cost model
  SpeculationMetrics speculation_;
  // Every request's tests pooled: the prior a request starts from and relaxes toward.
  Speculation pooled_;
  std::map<RequestId, std::unique_ptr<Request>> requests_;
  RequestId next_id_ = 1;
  uint64_t next_arrival_ = 0;
  int64_t num_prompt_tokens_computed_ = 0;
  int64_t num_generated_tokens_ = 0;
  double execute_seconds_ = 0.0;
  double update_seconds_ = 0.0;
  int64_t num_steps_ = 0;
  int64_t num_device_sampled_steps_ = 0;
};

}  // namespace folio
