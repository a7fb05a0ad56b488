// KvCacheManager: every sequence's block table over one BlockPool of device blocks, with
// automatic prefix caching, copy-on-write forks, and swapping to a pool of host blocks. It
// decides which block holds which token; it never touches K/V bytes. Copies it decides
// (copy-on-write, swap out, swap in) queue up as BlockCopy records, in decision order, for the
// model runner to perform before the next forward pass (take_pending_copies).
//
// The shape follows vLLM v1's kv_cache_manager.py (one allocate_slots, all-or-nothing) and
// nano-vllm's block_manager.py (paired can_/do verbs). One engine thread owns it: no locks.
//
// A sequence here is only: its block table, its token count (slots reserved, from position 0),
// and the hashes of its leading full blocks. Its token ids stay with the scheduler, which passes
// them in when they matter (find_cached_prefix, cache_full_blocks).
//
// Typical step, for each scheduled sequence:
//   new:       match = find_cached_prefix(prompt, adapter_key)
//              allocate_slots(id, chunk, match)       // reuses match.num_computed_tokens
//   running:   release_out_of_window(id, computed tokens); allocate_slots(id, chunk or 1)
//   runner:    execute_block_copies(take_pending_copies(), ...); forward pass writes K/V
//              at slot_mapping(id, first_new_position, chunk)
//   after:     cache_full_blocks(id, tokens whose K/V are computed)
//   finished:  free(id)
//
// With a residual format (KIVI) every block is unsealed while it fills: its tokens live in a
// staging block it borrows from the pool (allocate_slots lends one to each new block, and
// copy-on-write, swap out and swap in move it with the block), and the forward pass that fills
// it seals it (quantizes the staging into the block's bytes); cache_full_blocks then returns
// the staging block. Unsealed blocks are always the last ones of a table (staged_blocks), and
// full blocks, the only ones the prefix cache hands out, are sealed.
//
// Sliding-window layers (kv_groups.h): with several groups a sequence has one table per group,
// all over the same pool and covering the same tokens. A window group's table gives its leading
// blocks back once no query can reach them any more: release_out_of_window(id, p), called
// before scheduling a sequence's tokens from position p, frees the blocks before
// first_block_in_window(p), leaving the null block in their entries (the kernels never read
// before the window). Prefix lookups then need, in a
// window group, only the blocks inside the window of the first new token, and fill the rest
// with the null block. Everything else (copy-on-write, forks, swap, truncate, the prefix cache's
// hashes, keyed per group) runs per group; a sequence swaps, frees and forks as one.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "kv/block_copy.h"
#include "kv/block_hash.h"
#include "kv/block_pool.h"

namespace folio {

using SequenceId = int64_t;

struct KvCacheConfig {
  int32_t num_blocks = 0;       // device blocks, the null block 0 included (= storage's count)
  int32_t block_size = 16;      // tokens per block
  int32_t num_host_blocks = 0;  // host swap blocks, null block included; <= 1: no swapping
  bool enable_prefix_caching = true;
  // Residual formats (kv_format.h): staging blocks lent to unsealed blocks, on the device and
  // for swapped sequences on the host. 0 for the formats without a residual.
  int32_t num_staging_blocks = 0;
  int32_t num_host_staging_blocks = 0;
  // One window per group (kv_groups.h; 0: the whole context); empty: one full group.
  std::vector<int32_t> group_windows{};
  // Device block ids num_blocks .. num_blocks + num_overlay_blocks - 1 address the staging
  // blocks' bytes (block_pool.h); the two byte counts say which overlap which.
  int32_t num_overlay_blocks = 0;
  int64_t bytes_per_staging_block = 0;
  int64_t bytes_per_block = 0;
};

// The longest cached prefix of a token list: full blocks only, and never all of the tokens
// (the last one must be computed for its logits). Valid until the manager next changes: pass
// it straight to allocate_slots, which takes the references.
struct GroupPrefixMatch {
  std::vector<int32_t> block_ids;      // (num hit blocks,) in position order; null outside the window
  std::vector<uint64_t> block_hashes;  // (num hit blocks,) their chained hashes (in the group's chain)
};

struct PrefixMatch {
  uint64_t extra_key = kNoExtraKey;             // part of every block's identity (adapter, media)
  int32_t num_query_tokens = 0;                 // tokens looked up
  int32_t num_query_blocks = 0;                 // full blocks that could have hit
  int32_t num_computed_tokens = 0;              // block_ids.size() * block_size: K/V already in the cache
  std::vector<int32_t> block_ids;               // (num hit blocks,) group 0's, in position order
  std::vector<uint64_t> block_hashes;           // (num hit blocks,) their chained hashes
  std::vector<GroupPrefixMatch> more_groups{};  // groups 1.. (empty when nothing hit)
};

struct KvCacheMetrics {
  int32_t num_blocks = 0;  // usable device blocks (null block excluded)
  int32_t num_used_blocks = 0;
  int32_t num_free_blocks = 0;          // cached free blocks included: they can be handed out
  int32_t num_cached_blocks = 0;        // blocks the prefix cache can find, used or free
  int32_t num_overlay_blocks = 0;       // of num_blocks, ids over the staging blocks (block_pool.h)
  int32_t num_used_overlay_blocks = 0;  // of num_used_blocks
  int64_t num_overlay_allocations = 0;  // overlay ids handed out since construction
  double usage = 0.0;                   // num_used_blocks / num_blocks
  int64_t num_tokens_held = 0;          // token slots in used blocks that some sequence has taken
  int64_t num_token_slots = 0;          // num_used_blocks * block_size
  double kv_utilization = 0.0;          // num_tokens_held / num_token_slots (1 when nothing is used)
  int32_t num_host_blocks = 0;          // usable host blocks
  int32_t num_used_host_blocks = 0;
  int32_t num_sequences = 0;  // running and swapped
  int32_t num_swapped_sequences = 0;
  int64_t num_copy_on_write_blocks = 0;  // since construction
  int64_t num_swapped_out_blocks = 0;
  int64_t num_swapped_in_blocks = 0;
  PrefixCacheStats prefix_cache;
};

class KvCacheManager {
 public:
  explicit KvCacheManager(const KvCacheConfig& config);

  int32_t block_size() const { return block_size_; }
  int32_t num_groups() const { return static_cast<int32_t>(windows_.size()); }
  int32_t group_window(int32_t group) const { return windows_[static_cast<size_t>(group)]; }
  int32_t num_free_blocks() const { return device_pool_.num_free_blocks(); }
  int32_t blocks_for_tokens(int32_t num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }
  const BlockPool& device_pool() const { return device_pool_; }
  const BlockPool& host_pool() const { return host_pool_; }

  // ---- prefix cache -------------------------------------------------------------------
  // Longest run of cached full blocks from position 0 (an empty match, carrying extra_key,
  // when prefix caching is off). Takes no references and counts nothing: a request that waits
  // for room may look up again every step.
  PrefixMatch find_cached_prefix(std::span<const int32_t> token_ids, uint64_t extra_key = kNoExtraKey) const;

  // After the forward pass: makes the sequence's newly filled full blocks findable. token_ids
  // are its tokens from position 0 whose K/V are now computed (more are ignored). With a
  // residual format it also takes back the staging blocks of blocks the pass sealed.
  void cache_full_blocks(SequenceId sequence, std::span<const int32_t> token_ids);

  // ---- allocation ---------------------------------------------------------------------
  // Reserves slots for num_new_tokens more tokens of a sequence, all or nothing:
  //
  //   positions  0 ...................... num_tokens ............ num_tokens + num_new_tokens
  //              | full blocks             | partial |  new slots  |
  //   table      [ b0 ][ b1 ] ... [ bk-1 ][  bk .................. ][ new ][ new ]
  //                                          ^ written first. Shared (ref > 1): copy-on-write,
  //                                            a fresh block replaces it here, copy queued.
  //                                            Not shared but findable: leaves the prefix cache.
  //
  // A sequence not seen before is created; prefix (from find_cached_prefix on its tokens) then
  // supplies its first blocks and num_computed_tokens, and those tokens count as held. For a
  // known sequence prefix must be empty. False leaves every state as it was: the pool is full,
  // the sequence is swapped out, or the prefix match went stale.
  bool can_allocate_slots(SequenceId sequence, int32_t num_new_tokens, const PrefixMatch& prefix = {}) const;
  bool allocate_slots(SequenceId sequence, int32_t num_new_tokens, const PrefixMatch& prefix = {});

  // Window groups: frees the sequence's blocks that no query at `position` or later reads (those
  // before first_block_in_window(position)), their entries becoming the null block. Call it with
  // the sequence's computed tokens before scheduling its next ones; a no-op for full groups, a
  // swapped sequence, or blocks already released. Released blocks stay findable (cached free).
  void release_out_of_window(SequenceId sequence, int32_t position);

  // Gives back slots past num_tokens (rejected speculative tokens), freeing blocks left empty.
  // With window groups num_tokens must lie past the last release's position (as after
  // verification: the verified token's position + 1), so that nothing the next query reads was
  // released.
  // The new last block may stay findable (its K/V are still right) until it is written. With a
  // residual format the new last block must still be unsealed (a sealed block's fp16 tokens are
  // gone).
  void truncate(SequenceId sequence, int32_t num_tokens);

  // Releases a finished, aborted or preempted (by recompute) sequence's blocks, last block
  // first so that its prefix's tail is evicted before its head. Unknown ids are ignored.
  void free(SequenceId sequence);

  // child gets parent's table; every block gains a reference. The first write into the shared
  // partial block copies it (allocate_slots), full blocks stay shared for good. Fork after the
  // forward pass that wrote the parent's reserved slots, as parallel sampling and beam search do.
  void fork(SequenceId parent, SequenceId child);

  // ---- swapping (preemption by swap) ------------------------------------------------------
  // Moves the sequences' blocks to host blocks and frees the device blocks. A block shared by
  // several of these sequences (a fork family: swap it together) becomes one host block;
  // a block also held by a sequence that stays keeps its device copy for that one.
  bool can_swap_out(std::span<const SequenceId> sequences) const;
  bool swap_out(std::span<const SequenceId> sequences);
  // The reverse, sharing preserved the same way. Swapped-in blocks are re-registered in the
  // prefix cache by the next cache_full_blocks.
  bool can_swap_in(std::span<const SequenceId> sequences) const;
  bool swap_in(std::span<const SequenceId> sequences);

  // Copies decided since the last call, in decision order; run them before the forward pass.
  std::vector<BlockCopy> take_pending_copies();
  std::span<const BlockCopy> pending_copies() const { return pending_copies_; }

  // ---- tables and slots ---------------------------------------------------------------
  bool contains(SequenceId sequence) const { return sequences_.contains(sequence); }
  bool is_swapped(SequenceId sequence) const;
  int32_t num_tokens(SequenceId sequence) const;
  // A window group's table starts with null blocks where it released them.
  std::span<const int32_t> block_table(SequenceId sequence, int32_t group = 0) const;       // device; empty if swapped
  std::span<const int32_t> host_block_table(SequenceId sequence, int32_t group = 0) const;  // while swapped
  // Distinct blocks the sequence's tables hold (host ones while swapped), every group's.
  int32_t num_blocks_held(SequenceId sequence) const;
  // Where position's K/V live: table[position / block_size] * block_size + position % block_size.
  int32_t slot(SequenceId sequence, int32_t position, int32_t group = 0) const;
  // Appends the slots of positions [first_position, first_position + count).
  void append_slot_mapping(SequenceId sequence, int32_t first_position, int32_t count, std::vector<int32_t>& slots,
                           int32_t group = 0) const;
  // Residual formats: the index of the sequence's first unsealed block (the table's size when
  // none is), and the staging blocks of blocks [that index, table size) appended to `staging`.
  int32_t staged_blocks(SequenceId sequence, std::vector<int32_t>* staging = nullptr, int32_t group = 0) const;
  bool has_residual() const { return device_pool_.num_staging() > 0; }

  KvCacheMetrics metrics() const;

  // Both pools' own invariants, plus: every block's ref count equals the number of tables
  // holding it, no table holds a block twice, only window groups hold the null block (as a
  // leading run, before the window of the sequence's next token), tables cover exactly their
  // tokens, and the blocks a sequence counts as cached carry the hashes it recorded.
  Status check_invariants() const;

 private:
  struct GroupBlocks {
    std::vector<int32_t> block_table;       // device blocks in position order; empty when swapped
    std::vector<int32_t> host_block_table;  // host blocks while swapped
    std::vector<uint64_t> block_hashes;     // chained hashes of leading full blocks
    int32_t num_cached_blocks = 0;          // leading blocks already registered (or released)
  };

  struct SequenceBlocks {
    std::vector<GroupBlocks> groups;  // (num_groups,)
    int32_t num_tokens = 0;           // slots taken, from position 0
    uint64_t extra_key = kNoExtraKey;
    bool swapped = false;
  };

  struct AllocationPlan {
    int32_t num_blocks_to_allocate = 0;  // new table entries, plus one per copy-on-write
                                         // (each lent a staging block with a residual format)
    int32_t num_prefix_blocks_free = 0;  // prefix blocks that now sit in the free queue
    std::vector<int32_t> new_blocks;     // (num_groups,) new table entries per group
    std::vector<char> copy_on_write;     // (num_groups,)
  };

  std::optional<AllocationPlan> plan_allocation(SequenceId sequence, int32_t num_new_tokens,
                                                const PrefixMatch& prefix) const;
  // The prefix cache's extra key of a group's blocks: a group's block holds other layers' K/V
  // than another group's block of the same tokens.
  static uint64_t group_extra_key(uint64_t extra_key, int32_t group);
  // Group 0's ids and hashes, or group g's from more_groups; nothing when the match is empty.
  static const GroupPrefixMatch* group_match(const PrefixMatch& prefix, int32_t group, GroupPrefixMatch& scratch);
  // Blocks of a window group's table that no query from `position` on can read.
  int32_t num_out_of_window(const GroupBlocks& group_state, int32_t group, int32_t position) const;
  // Distinct blocks of the given tables, in first-seen order; nothing if an id is unknown,
  // repeated, or in the wrong state.
  std::optional<std::vector<int32_t>> distinct_blocks(std::span<const SequenceId> sequences, bool swapped) const;
  SequenceBlocks& running(SequenceId sequence);
  const SequenceBlocks& at(SequenceId sequence) const;
  Status check_tables(const BlockPool& pool, bool host) const;
  // Unsealed blocks form a suffix of the table that contains its partial last block.
  Status check_staging(SequenceId id, const SequenceBlocks& state) const;
  Status check_sequence(SequenceId id, const SequenceBlocks& state) const;
  // Distinct blocks among `blocks` that hold a staging block.
  int32_t count_staged(const BlockPool& pool, std::span<const int32_t> blocks) const;

  int32_t block_size_;
  std::vector<int32_t> windows_;  // (num_groups,)
  BlockPool device_pool_;
  BlockPool host_pool_;
  std::unordered_map<SequenceId, SequenceBlocks> sequences_;
  std::vector<BlockCopy> pending_copies_;
  int64_t num_copy_on_write_blocks_ = 0;
  int64_t num_swapped_out_blocks_ = 0;
  int64_t num_swapped_in_blocks_ = 0;
};

}  // namespace folio
