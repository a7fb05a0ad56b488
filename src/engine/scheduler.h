// Continuous batching: every step spends a token budget over running requests first (decode
// tokens and unfinished prefill chunks), then admits waiting ones, chunking any prompt longer
// than what is left of the budget. When the KV pool cannot hold a running request's next
// tokens, the newest (lowest-priority) running request is preempted, by recompute (its blocks
// freed, its tokens prefilled again later) or by swapping its blocks to host memory.
//
// The scheduler is the only owner of the KV manager and the only writer of a request's status:
// the engine asks it to fork a sequence (n > 1, beams) and to finish one.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "engine/request.h"
#include "engine/scheduler_output.h"
#include "kv/kv_cache_manager.h"

namespace folio {

enum class PreemptionMode { kRecompute, kSwap };

// The most output tokens admission_reserve counts for one request (SGLang clips its estimate the
// same way), so that requests whose max_tokens is the whole context do not shut admission.
inline constexpr int32_t kGrowthEstimateCap = 4096;

struct SchedulerConfig {
  int32_t max_num_batched_tokens = 512;  // tokens per forward pass
  int32_t max_num_seqs = 64;             // running requests at once
  PreemptionMode preemption_mode = PreemptionMode::kRecompute;
  // Most prompt tokens (prefill chunks, new admissions) a step carries while some running
  // request decodes, so that a long prompt does not hold up every running request's next token
  // (stall-free batching; 0: no limit beyond max_num_batched_tokens). A step without decodes
  // still fills the whole budget.
  int32_t max_prefill_tokens_while_decoding = 0;
  // Admission that keeps room for the running requests' growth (SGLang's new-token ratio): a
  // waiting request is admitted only while the free KV slots cover its uncached prompt and, for
  // it and for every running request, `ratio` of the output tokens each may still write
  // (max_tokens less what it wrote, counted up to kGrowthEstimateCap: a request without a limit
  // gets the whole context as max_tokens) plus their prompt tokens not yet computed. The ratio starts
  // at admission_reserve, falls linearly to admission_reserve_floor over 600 steps without a
  // preemption and goes back up after one. 0: admit whatever fits now and preempt later if the
  // pool runs out (each preemption by recompute redoes the victim's whole prefill).
  double admission_reserve = 0.0;
  double admission_reserve_floor = 0.0;
  // A waiting request whose prompt shares at least this many tokens beyond its cached prefix
  // with full blocks that another request's chunk in the same step computes waits (and, first
  // come first served, the requests behind it) until that pass has made them findable, then
  // starts from them instead of computing them a second time in the same pass: a burst of
  // requests behind one long system prompt computes it once. The price is one step of the
  // waiting request's first-token latency per such chunk, hence the threshold (a step's prefill
  // of a few hundred tokens costs about what a step costs). 0, or prefix caching off: never.
  int32_t min_deferred_prefix_tokens = 256;
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, const KvCacheConfig& kv);

  void add(Request* request);
  // child continues parent: while parent runs, child shares its blocks (copy-on-write on the
  // first write into the shared last one) and runs at once with parent's computed tokens; a
  // parent that was preempted meanwhile leaves child to be prefilled from nothing. Fork after
  // the forward pass that wrote the parent's reserved slots.
  void fork(const Request& parent, Request* child);
  // Drops the request from whichever queue holds it, frees its blocks at once and marks it
  // finished with the reason.
  void finish(Request* request, FinishReason reason);
  // A running request that is decoding and carries proposals (request->speculation) gets them
  // as extra tokens of its chunk where the step's token budget and free blocks allow, after
  // every other chunk is placed: speculation never preempts or delays anything. Proposals that
  // do not fit are dropped from the request.
  SchedulerOutput schedule();
  // After the forward pass: the scheduled chunks' tokens are computed; their full blocks become
  // findable in the prefix cache. accepted: per chunk, how many of its proposals verification
  // kept (empty: no chunk had any); the slots of the others are given back.
  void on_computed(const SchedulerOutput& output, std::span<const int32_t> accepted = {});

  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_swapped() const { return static_cast<int32_t>(swapped_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }
  bool has_work() const { return !waiting_.empty() || !running_.empty() || !swapped_.empty(); }
  const KvCacheManager& kv() const { return kv_; }
  std::span<Request* const> running() const { return running_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  // Reserves slots for the request's next chunk, preempting others (newest first) as needed; a
  // prefill chunk that would preempt the request itself shrinks to what fits instead (updating
  // num_new_tokens). False when the request itself had to be preempted.
  bool reserve_running(Request* request, int32_t& num_new_tokens, SchedulerOutput& output);
  // The most of num_new_tokens (which do not fit) that fit now; 0 when none do.
  int32_t largest_fitting_chunk(SequenceId sequence, int32_t num_new_tokens, const PrefixMatch& prefix = {}) const;
  void preempt(Request* victim, SchedulerOutput& output);
  void add_running(Request* request);
  void swap_in_what_fits();
  void admit_waiting(int32_t& budget, int32_t& prefill_budget, SchedulerOutput& output);
  // How many of request's first tokens the full blocks this step's chunks complete hold (its
  // longest common prefix with a chunk's request, up to where the chunk ends, in whole blocks;
  // only chunks that complete a block count).
  int32_t pending_prefix_tokens(const Request& request, const SchedulerOutput& output) const;
  void add_proposals(int32_t& budget, SchedulerOutput& output);
  static bool runs_before(const Request* a, const Request* b);
  // Sequences a request will have once its parallel samples or beams are forked.
  static int32_t sequences_of(const Request* request);
  int32_t committed_sequences() const;
  // admission_reserve: whether the free slots cover `request` (its first `cached` tokens found
  // in the prefix cache) beside the room kept for every running request's growth. scheduled:
  // the tokens this step's chunks already hold slots for (not yet computed, not to be counted
  // again).
  bool leaves_room_to_grow(const Request* request, int32_t cached, int32_t scheduled) const;
  void update_reserve_ratio(bool preempted);

  SchedulerConfig config_;
  KvCacheManager kv_;
  std::deque<Request*> waiting_;   // in priority, then arrival, order
  std::vector<Request*> running_;  // in priority, then arrival, order
  std::deque<Request*> swapped_;
  int64_t num_preemptions_ = 0;
  double reserve_ratio_ = 0.0;  // admission_reserve's current ratio
};

}  // namespace folio
