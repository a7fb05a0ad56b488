// BlockPool: the KV blocks' bookkeeping (not their memory; see kv_cache_storage.h). Ref counts,
// an LRU free queue, and the prefix cache's hash -> block map. The model is vLLM v1's
// block_pool.py (FreeKVCacheBlockQueue, BlockHashToBlockMap) and mistral.rs's index-linked
// free list, laid out as one metadata array so that every operation is O(1) and allocation free.
//
// A block is in exactly one state:
//   in use    ref_count > 0, not in the free queue (held by ref_count block tables)
//   free      ref_count == 0, in the free queue; it may still carry a hash ("cached free"):
//             its K/V stay valid and findable until allocate() hands its slot out again
//   null      block 0, reserved: never allocated, never freed, never in the queue. Tables
//             and kernels can use it as padding without pointing at anyone's data.
//
// Overlay ids (residual formats, staging_overlay.h): ids num_plain_blocks() .. num_blocks() - 1
// address the staging blocks' bytes. They are handed out only once the plain ids run out, never
// while a staging block over the same bytes is lent, and never sit in the free queue: a freed
// overlay id forgets its hash (the prefix cache lives in plain ids, which outlast the staging
// blocks' churn) and waits in the overlay's free set.
//
// Eviction order. allocate() pops the queue's head. free_blocks() appends blocks with a hash
// to the tail, in the order given: callers free a sequence's blocks last block first, so a
// prefix's tail is evicted before its head (a tail is only useful with its head). Blocks
// without a hash hold nothing reusable and go to the head, to be reused first.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "kv/block_hash.h"
#include "kv/staging_overlay.h"

namespace folio {

// Counted where a new sequence's prompt meets the prefix cache (KvCacheManager::allocate_slots).
struct PrefixCacheStats {
  int64_t num_queries = 0;       // sequences looked up
  int64_t num_query_tokens = 0;  // their tokens
  int64_t num_hit_tokens = 0;    // tokens whose K/V came from the cache
  int64_t num_query_blocks = 0;  // full blocks that could have hit (excluding the last token)
  int64_t num_hit_blocks = 0;    // full blocks that did

  double token_hit_rate() const {
    return num_query_tokens == 0 ? 0.0 : static_cast<double>(num_hit_tokens) / num_query_tokens;
  }
};

class BlockPool {
 public:
  static constexpr int32_t kNullBlock = 0;

  // num_blocks counts the null block, so it equals the storage's plain block count;
  // num_blocks >= 1. num_staging > 0 for a residual format (kv_format.h): staging blocks to lend
  // unsealed blocks, each staging_bytes long, with num_overlay_blocks more ids of block_bytes
  // each laid over their bytes (0: none; both byte counts per layer, or for all layers alike).
  BlockPool(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching, int32_t num_staging = 0,
            int32_t num_overlay_blocks = 0, int64_t staging_bytes = 0, int64_t block_bytes = 0);

  int32_t num_blocks() const { return num_blocks_; }  // ids, overlay ids included
  int32_t num_plain_blocks() const { return num_plain_; }
  int32_t num_usable_blocks() const { return num_blocks_ - 1; }
  int32_t block_size() const { return block_size_; }
  bool prefix_caching_enabled() const { return enable_prefix_caching_; }
  bool is_overlay(int32_t block_id) const { return block_id >= num_plain_; }

  // Blocks allocate() can hand out now: free plain blocks (cached free ones included) and
  // overlay ids over no lent staging block.
  int32_t num_free_blocks() const { return num_free_blocks_ + overlay_.num_available_ids(); }
  int32_t num_used_blocks() const { return num_plain_ - 1 - num_free_blocks_ + overlay_.num_busy_ids(); }
  int32_t num_cached_blocks() const { return static_cast<int32_t>(cached_blocks_.size()); }
  int32_t num_used_overlay_blocks() const { return overlay_.num_busy_ids(); }
  // Blocks one more lent staging block takes from what allocate() can hand out, rounded up: a
  // growing sequence's cost beyond its blocks (0 when staging blocks hold nothing else).
  int32_t blocks_per_staging() const { return overlay_.ids_per_staging(); }
  int64_t num_overlay_allocations() const { return num_overlay_allocations_; }
  double usage() const;  // fraction of usable blocks in use, 0..1

  // count blocks with ref_count 1, the first num_staged of them each lent a staging block, or
  // nothing at all when that many are not free. Plain blocks go first (reusing a cached free
  // block evicts its hash), then the lowest overlay ids; staging blocks are taken before the
  // ids, so an id never lands on a staging block this call lends.
  std::optional<std::vector<int32_t>> allocate(int32_t count, int32_t num_staged = 0);
  // Whether allocate(count, num_staged) would succeed after reserved_free cached free blocks
  // leave the free queue (prefix hits about to be referenced).
  bool can_allocate(int32_t count, int32_t num_staged = 0, int32_t reserved_free = 0) const;

  // Drops one reference from each block, in the order given. Blocks reaching zero join the
  // free queue (see eviction order above).
  void free_blocks(std::span<const int32_t> block_ids);

  // Takes one more reference on a block: a prefix-cache hit, or a fork sharing it. A block that
  // was free leaves the free queue (O(1), from anywhere in it).
  void take_ref(int32_t block_id);

  int32_t ref_count(int32_t block_id) const { return blocks_[check_id(block_id)].ref_count; }
  bool is_free(int32_t block_id) const;
  std::optional<uint64_t> block_hash(int32_t block_id) const;

  // ---- staging (residual formats) --------------------------------------------------------
  // An unsealed block (its tokens still in fp16, not yet quantized) holds one staging block
  // until it is sealed (release_staging) or freed (its last reference dropped). Staging ids
  // count from 0 and are unrelated to block ids.
  int32_t num_staging() const { return static_cast<int32_t>(staging_owner_.size()); }
  // Staging blocks that can be lent now (free, and under no overlay id in use).
  int32_t num_free_staging() const { return overlay_.num_available_staging(); }
  // The block's staging block, or -1 when it is sealed (or the format has no residual).
  int32_t staging(int32_t block_id) const { return blocks_[check_id(block_id)].staging; }
  // Lends an in-use block a staging block (the highest free one); false when none is free.
  bool assign_staging(int32_t block_id);
  void release_staging(int32_t block_id);

  // ---- prefix cache --------------------------------------------------------------------
  // A cached block (in use or free) whose hash, parent hash, extra key and tokens all equal
  // the key's; nothing when there is none or prefix caching is off.
  std::optional<int32_t> find_cached_block(const BlockKey& key) const;
  // Makes an in-use, full block findable. A block carries at most one hash; duplicates of the
  // same contents in different blocks are all kept.
  void cache_block(int32_t block_id, const BlockKey& key);
  // Forgets a block's hash, e.g. before its contents are overwritten.
  void uncache_block(int32_t block_id);

  void record_prefix_cache_query(int64_t query_tokens, int64_t hit_tokens, int64_t query_blocks, int64_t hit_blocks);
  const PrefixCacheStats& prefix_cache_stats() const { return stats_; }

  // Free queue in order, head first (tests and debugging).
  std::vector<int32_t> free_queue() const;

  // Links both ways, counts, ref counts vs queue membership, hash map vs block hashes.
  Status check_invariants() const;

 private:
  static constexpr int32_t kNoLink = -1;

  // Metadata of one block; entries num_blocks and num_blocks + 1 are the queue's sentinels, so
  // that push/pop/remove never test for an empty queue or an end.
  struct BlockEntry {
    int32_t ref_count = 0;
    int32_t prev_free = kNoLink;  // free-queue neighbours; kNoLink when not in the queue
    int32_t next_free = kNoLink;
    bool has_hash = false;
    uint64_t hash = 0;
    uint64_t parent_hash = 0;  // with extra_key and the tokens: what the hash was made from
    uint64_t extra_key = 0;
    int32_t staging = -1;  // staging block while unsealed
  };

  int32_t check_id(int32_t block_id) const;
  std::span<const int32_t> cached_tokens(int32_t block_id) const;
  bool key_matches(int32_t block_id, const BlockKey& key) const;
  void queue_insert_after(int32_t position, int32_t block_id);
  void queue_remove(int32_t block_id);

  int32_t num_blocks_;
  int32_t num_plain_;
  int32_t block_size_;
  bool enable_prefix_caching_;
  int32_t head_;  // sentinel before the first free block
  int32_t tail_;  // sentinel after the last free block
  int32_t num_free_blocks_ = 0;
  std::vector<BlockEntry> blocks_;         // (num_blocks + 2,) indexed by block id, then sentinels
  std::vector<int32_t> cached_token_ids_;  // (num_blocks, block_size) tokens of hashed blocks
  // hash -> block. A multimap, because different blocks may carry the same hash: duplicates
  // (two sequences computed the same prefix at once) and true collisions.
  std::unordered_multimap<uint64_t, int32_t> cached_blocks_;
  std::vector<int32_t> staging_owner_;  // (num_staging,) block holding it, or -1
  StagingOverlay overlay_;              // free staging blocks and overlay ids (id - num_plain_)
  int64_t num_overlay_allocations_ = 0;
  PrefixCacheStats stats_;
};

}  // namespace folio
