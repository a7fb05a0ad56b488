#include "engine/scheduler.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <sstream>

namespace folio {

std::string SchedulerOutput::to_string() const {
  std::ostringstream s;
  s << "SchedulerOutput{tokens=" << num_batched_tokens << ", chunks=[";
  for (const ScheduledChunk& c : chunks) {
    s << " {req " << c.request->id << " @" << c.first_position << " +" << c.num_new_tokens
      << (c.samples ? " sample" : "") << "}";
  }
  s << " ], copies=" << block_copies.size() << ", preempted=" << preempted.size() << "}";
  return s.str();
}

Scheduler::Scheduler(const SchedulerConfig& config, const KvCacheConfig& kv)
    : config_(config), kv_(kv), reserve_ratio_(config.admission_reserve) {}

bool Scheduler::runs_before(const Request* a, const Request* b) {
  if (a->params().priority != b->params().priority) return a->params().priority < b->params().priority;
  return a->arrival_order < b->arrival_order;
}

void Scheduler::add(Request* request) {
  request->status = RequestStatus::kWaiting;
  waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), request, runs_before), request);
}

void Scheduler::add_running(Request* request) {
  request->status = RequestStatus::kRunning;
  running_.insert(std::upper_bound(running_.begin(), running_.end(), request, runs_before), request);
}

void Scheduler::finish(Request* request, FinishReason reason) {
  std::erase(waiting_, request);
  std::erase(running_, request);
  std::erase(swapped_, request);
  kv_.free(request->sequence_id());
  request->status = RequestStatus::kFinished;
  request->finish_reason = reason;
}

void Scheduler::fork(const Request& parent, Request* child) {
  if (parent.status == RequestStatus::kRunning) {
    child->num_computed_tokens = parent.num_computed_tokens;
    kv_.fork(parent.sequence_id(), child->sequence_id());
    add_running(child);
  } else {
    // The parent was preempted (recomputed or swapped out) while its group waited: the child
    // starts from nothing and is prefilled like a preempted request.
    child->num_computed_tokens = 0;
    add(child);
  }
}

void Scheduler::preempt(Request* victim, SchedulerOutput& output) {
  std::erase(running_, victim);
  const SequenceId id = victim->sequence_id();
  const SequenceId ids[1] = {id};
  ++num_preemptions_;
  ++victim->num_preemptions;
  output.preempted.push_back(victim->id);
  if (config_.preemption_mode == PreemptionMode::kSwap && kv_.swap_out(ids)) {
    victim->status = RequestStatus::kSwapped;
    swapped_.push_back(victim);
    return;
  }
  // Recompute: its K/V are dropped and its tokens (prompt and output so far) prefilled again.
  kv_.free(id);
  victim->num_computed_tokens = 0;
  add(victim);
}

int32_t Scheduler::largest_fitting_chunk(SequenceId sequence, int32_t num_new_tokens, const PrefixMatch& prefix) const {
  int32_t fits = 0, fails = num_new_tokens;  // can_allocate_slots shrinks as the chunk grows
  while (fails - fits > 1) {
    const int32_t middle = fits + (fails - fits) / 2;
    (kv_.can_allocate_slots(sequence, middle, prefix) ? fits : fails) = middle;
  }
  return fits;
}

bool Scheduler::reserve_running(Request* request, int32_t& num_new_tokens, SchedulerOutput& output) {
  // Sliding-window layers: what no query from the request's next token on reads goes back first.
  kv_.release_out_of_window(request->sequence_id(), request->num_computed_tokens);
  while (!kv_.allocate_slots(request->sequence_id(), num_new_tokens)) {
    // The lowest-priority running request goes; if that is this one, it waits.
    Request* victim = running_.back();
    // Unless it is prefilling and part of its chunk fits: with a residual format every block of a
    // chunk needs a staging block at once, and with the staging overlay those take the memory
    // sealed blocks would use, so a whole chunk can fail in a pool that holds the request.
    if (victim == request && num_new_tokens > 1) {
      if (const int32_t fits = largest_fitting_chunk(request->sequence_id(), num_new_tokens); fits > 0) {
        num_new_tokens = fits;
        continue;
      }
    }
    preempt(victim, output);
    if (victim == request) return false;
  }
  return true;
}

void Scheduler::swap_in_what_fits() {
  while (!swapped_.empty() && static_cast<int32_t>(running_.size()) < config_.max_num_seqs) {
    Request* request = swapped_.front();
    const SequenceId ids[1] = {request->sequence_id()};
    // Room for the swapped blocks plus one more block per table keeps it from bouncing straight back.
    if (!kv_.can_swap_in(ids) || kv_.num_free_blocks() < kv_.num_blocks_held(ids[0]) + kv_.num_groups()) return;
    kv_.swap_in(ids);
    swapped_.pop_front();
    add_running(request);
  }
}

int32_t Scheduler::sequences_of(const Request* request) {
  return request->forked ? 1 : std::max(request->params().n, request->params().beam_width);
}

int32_t Scheduler::committed_sequences() const {
  int32_t total = 0;
  for (const Request* request : running_) total += sequences_of(request);
  return total;
}

bool Scheduler::leaves_room_to_grow(const Request* request, int32_t cached, int32_t scheduled) const {
  // Every group's table grows with a request, so a group's share of the free blocks bounds it.
  const int64_t free_slots = static_cast<int64_t>(kv_.num_free_blocks()) / kv_.num_groups() * kv_.block_size();
  auto growth = [&](const Request* r) {
    const int32_t left = std::clamp(r->params().max_tokens - r->num_output_tokens(), 0, kGrowthEstimateCap);
    return static_cast<int64_t>(std::ceil(reserve_ratio_ * left)) * sequences_of(r);
  };
  // Running requests' uncomputed tokens, less those this step's chunks already took slots for
  // (every chunk so far is a running request's, admitted ones included).
  int64_t reserved = -static_cast<int64_t>(scheduled);
  for (const Request* r : running_) reserved += growth(r) + (r->num_tokens() - r->num_computed_tokens);
  // With the staging overlay (kv/block_pool.h) a new sequence's staging block takes sealed blocks'
  // memory for as long as it runs (a KIVI-2 staging block holds 5.33 sealed blocks' bytes).
  const int64_t staging =
      static_cast<int64_t>(kv_.device_pool().blocks_per_staging()) * kv_.block_size() * sequences_of(request);
  return free_slots - reserved >= static_cast<int64_t>(request->num_tokens() - cached) + growth(request) + staging;
}

void Scheduler::update_reserve_ratio(bool preempted) {
  if (config_.admission_reserve <= 0.0) return;
  const double floor = std::min(config_.admission_reserve_floor, config_.admission_reserve);
  if (preempted) {
    reserve_ratio_ = config_.admission_reserve;
  } else {
    reserve_ratio_ = std::max(floor, reserve_ratio_ - (config_.admission_reserve - floor) / 600.0);
  }
}

void Scheduler::admit_waiting(int32_t& budget, int32_t& prefill_budget, SchedulerOutput& output) {
  while (std::min(budget, prefill_budget) > 0 && !waiting_.empty() &&
         static_cast<int32_t>(running_.size()) < config_.max_num_seqs) {
    Request* request = waiting_.front();
    // A request with n samples or beams grows to that many sequences: admit it only if they
    // fit under max_num_seqs (or nothing else runs, so that it cannot starve).
    if (!running_.empty() && committed_sequences() + sequences_of(request) > config_.max_num_seqs) return;
    const PrefixMatch prefix = kv_.find_cached_prefix(request->tokens);
    const int32_t computed = prefix.num_computed_tokens;
    if (config_.min_deferred_prefix_tokens > 0 && kv_.device_pool().prefix_caching_enabled() &&
        pending_prefix_tokens(*request, output) - computed >= config_.min_deferred_prefix_tokens) {
      return;  // next step its prefix is cached (SchedulerConfig::min_deferred_prefix_tokens)
    }
    if (reserve_ratio_ > 0.0 && !running_.empty() &&
        !leaves_room_to_grow(request, computed, output.num_batched_tokens)) {
      return;
    }
    int32_t num_new = std::min({request->num_tokens() - computed, budget, prefill_budget});
    // Nothing runs, so no room will come: take the part of the chunk that fits (see
    // reserve_running), or a residual format's chunk could wait forever in an empty pool.
    if (running_.empty() && !kv_.can_allocate_slots(request->sequence_id(), num_new, prefix)) {
      num_new = largest_fitting_chunk(request->sequence_id(), num_new, prefix);
    }
    if (num_new == 0 || !kv_.allocate_slots(request->sequence_id(), num_new, prefix)) return;  // wait for room
    waiting_.pop_front();
    request->num_computed_tokens = computed;
    request->status = RequestStatus::kRunning;
    running_.push_back(request);
    output.chunks.push_back({request, computed, num_new, computed + num_new == request->num_tokens(), {}});
    output.num_batched_tokens += num_new;
    budget -= num_new;
    prefill_budget -= num_new;
  }
}

int32_t Scheduler::pending_prefix_tokens(const Request& request, const SchedulerOutput& output) const {
  const int32_t block_size = kv_.block_size();
  // The request's last token is always computed (find_cached_prefix leaves it out too).
  const int32_t most = request.num_tokens() - 1;
  int32_t best = 0;
  for (const ScheduledChunk& chunk : output.chunks) {
    const Request& other = *chunk.request;
    const int32_t end = std::min({chunk.first_position + chunk.num_new_tokens, other.num_tokens(), most});
    // Only blocks this chunk completes are worth waiting for: the ones before its first position
    // were completed by earlier steps (already cached, or waiting would not cache them either).
    // This also skips, before any token is compared, the decode chunks of requests that run past
    // the waiting prompt, which with hundreds of requests sharing a prompt was the host's cost.
    if (end / block_size * block_size <= std::max(best, chunk.first_position / block_size * block_size)) continue;
    int32_t same = 0;
    while (same < end && request.tokens[static_cast<size_t>(same)] == other.tokens[static_cast<size_t>(same)]) ++same;
    best = std::max(best, same / block_size * block_size);
  }
  return best;
}

void Scheduler::add_proposals(int32_t& budget, SchedulerOutput& output) {
  const int32_t block_size = kv_.block_size();
  for (ScheduledChunk& chunk : output.chunks) {
    Request* request = chunk.request;
    Speculation& speculation = request->speculation;
    if (speculation.draft_tokens.empty()) continue;
    int32_t count = 0;
    // Only a decode chunk (the request's one uncomputed token) takes proposals.
    if (chunk.num_new_tokens == 1 && chunk.first_position + 1 == request->num_tokens()) {
      count = std::min(static_cast<int32_t>(speculation.draft_tokens.size()), budget);
      // Residual formats: a block is quantized when a pass fills it, and rejected proposals
      // cannot be taken out of a quantized block, so proposals stop short of filling one.
      if (kv_.has_residual()) count = std::min(count, block_size - 1 - request->num_tokens() % block_size);
      if (count > 0 && !kv_.allocate_slots(request->sequence_id(), count)) count = 0;
    }
    speculation.draft_tokens.resize(static_cast<size_t>(std::max(count, 0)));
    if (!speculation.draft_probs.empty()) speculation.draft_probs.resize(speculation.draft_tokens.size());
    if (count <= 0) continue;
    chunk.num_new_tokens += count;
    chunk.num_draft_tokens = count;
    output.num_batched_tokens += count;
    budget -= count;
  }
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput output;
  output.block_size = kv_.block_size();
  output.kv_residual = kv_.has_residual();
  int32_t budget = config_.max_num_batched_tokens;
  swap_in_what_fits();
  // Prompt tokens this step may carry: all of the budget, unless some running request decodes
  // (one uncomputed token) and a limit is set. A chunk of more than one token is prefill (a
  // prompt, or a recomputed request's tokens).
  int32_t prefill_budget = budget;
  if (config_.max_prefill_tokens_while_decoding > 0) {
    for (const Request* request : running_) {
      if (request->num_tokens() - request->num_computed_tokens == 1) {
        prefill_budget = config_.max_prefill_tokens_while_decoding;
        break;
      }
    }
  }

  // Running requests, in priority order; preemption takes from the back of running_.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Request* request = running_[i];
    const int32_t remaining = request->num_tokens() - request->num_computed_tokens;
    const bool prefill = remaining > 1;
    int32_t num_new = std::min(remaining, budget);
    if (prefill) num_new = std::min(num_new, prefill_budget);
    if (num_new == 0) {  // a beam waiting for the rest of its group to be scored, or no prefill room
      ++i;
      continue;
    }
    if (!reserve_running(request, num_new, output)) break;  // it was the last one left
    output.chunks.push_back({request,
                             request->num_computed_tokens,
                             num_new,
                             request->num_computed_tokens + num_new == request->num_tokens(),
                             {}});
    output.num_batched_tokens += num_new;
    budget -= num_new;
    if (prefill) prefill_budget -= num_new;
    ++i;
  }
  // New requests only when nothing had to give way this step (otherwise they would take the
  // blocks the preempted ones need back).
  if (output.preempted.empty() && swapped_.empty()) admit_waiting(budget, prefill_budget, output);
  add_proposals(budget, output);
  // Nothing could run, yet work waits: the running set is made of scored beams holding blocks
  // while their siblings wait for room. Free the newest of them (it is recomputed later), or
  // the engine would stall forever.
  if (output.chunks.empty() && (!waiting_.empty() || !swapped_.empty())) {
    for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
      if ((*it)->num_computed_tokens == (*it)->num_tokens()) {
        preempt(*it, output);
        break;
      }
    }
  }
  update_reserve_ratio(!output.preempted.empty());
  // Tables are read once every allocation of the step is done (copy-on-write may have replaced
  // an entry), and the copies leave the KV manager with the step that runs them.
  for (ScheduledChunk& chunk : output.chunks) {
    const SequenceId id = chunk.request->sequence_id();
    chunk.block_table = kv_.block_table(id);
    chunk.first_staged_block = kv_.staged_blocks(id, &chunk.staging);
    chunk.more_groups.resize(static_cast<size_t>(kv_.num_groups() - 1));
    for (int32_t g = 1; g < kv_.num_groups(); ++g) {
      ChunkGroupTable& group = chunk.more_groups[static_cast<size_t>(g - 1)];
      group.block_table = kv_.block_table(id, g);
      group.first_staged_block = kv_.staged_blocks(id, &group.staging, g);
    }
  }
  output.block_copies = kv_.take_pending_copies();
  return output;
}

void Scheduler::on_computed(const SchedulerOutput& output, std::span<const int32_t> accepted) {
  std::vector<int32_t> tokens;
  for (size_t i = 0; i < output.chunks.size(); ++i) {
    const ScheduledChunk& chunk = output.chunks[i];
    Request* request = chunk.request;
    if (chunk.num_draft_tokens == 0) {
      request->num_computed_tokens = chunk.first_position + chunk.num_new_tokens;
      kv_.cache_full_blocks(request->sequence_id(),
                            std::span<const int32_t>(request->tokens).first(request->num_computed_tokens));
      continue;
    }
    // The last token and the accepted proposals have their K/V; the rejected ones' slots go
    // back (their blocks freed when left empty). Only tokens the request keeps reach the prefix
    // cache: the block hashes are of the accepted tokens.
    const int32_t kept = accepted.empty() ? 0 : accepted[i];
    request->num_computed_tokens = chunk.first_position + 1 + kept;
    if (kept < chunk.num_draft_tokens) kv_.truncate(request->sequence_id(), request->num_computed_tokens);
    tokens.assign(request->tokens.begin(), request->tokens.end());
    const std::vector<int32_t>& drafts = request->speculation.draft_tokens;
    tokens.insert(tokens.end(), drafts.begin(), drafts.begin() + kept);
    kv_.cache_full_blocks(request->sequence_id(), tokens);
  }
}

}  // namespace folio
