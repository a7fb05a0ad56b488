#include "kv/block_pool.h"

#include <algorithm>
#include <cassert>
#include <string>

namespace folio {

BlockPool::BlockPool(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching, int32_t num_staging,
                     int32_t num_overlay_blocks, int64_t staging_bytes, int64_t block_bytes)
    : num_blocks_(num_blocks + std::max(0, num_overlay_blocks)),
      num_plain_(num_blocks),
      block_size_(block_size),
      enable_prefix_caching_(enable_prefix_caching),
      head_(num_blocks_),
      tail_(num_blocks_ + 1),
      blocks_(static_cast<size_t>(num_blocks_) + 2),
      staging_owner_(static_cast<size_t>(std::max(0, num_staging)), -1),
      overlay_(std::max(0, num_staging), staging_bytes, num_overlay_blocks > 0 ? block_bytes : 0,
               std::max(0, num_overlay_blocks)) {
  assert(num_blocks >= 1 && "the pool needs at least the null block");
  assert(block_size >= 1);
  assert(overlay_.num_ids() == num_blocks_ - num_plain_ && "overlay ids need their byte sizes");
  if (enable_prefix_caching_) cached_token_ids_.resize(static_cast<size_t>(num_blocks_) * block_size);
  blocks_[head_].next_free = tail_;
  blocks_[tail_].prev_free = head_;
  // Ascending ids: a fresh pool hands out blocks 1, 2, 3, ... (easy to read in a debugger).
  for (int32_t id = 1; id < num_plain_; ++id) queue_insert_after(blocks_[tail_].prev_free, id);
}

double BlockPool::usage() const {
  if (num_usable_blocks() == 0) return 0.0;
  return static_cast<double>(num_used_blocks()) / num_usable_blocks();
}

bool BlockPool::can_allocate(int32_t count, int32_t num_staged, int32_t reserved_free) const {
  assert(count >= 0 && num_staged >= 0 && num_staged <= count);
  if (num_staged > overlay_.num_available_staging()) return false;
  return count <= num_free_blocks_ - reserved_free + overlay_.num_available_ids() -
                      overlay_.ids_blocked_by_next_staging(num_staged);
}

std::optional<std::vector<int32_t>> BlockPool::allocate(int32_t count, int32_t num_staged) {
  if (!can_allocate(count, num_staged)) return std::nullopt;
  std::vector<int32_t> lent(static_cast<size_t>(num_staged));
  for (int32_t& staging : lent) staging = overlay_.take_staging();
  std::vector<int32_t> ids;
  ids.reserve(count);
  for (int32_t i = 0; i < count; ++i) {
    int32_t id = blocks_[head_].next_free;
    if (id != tail_) {
      queue_remove(id);
      // Its slot is about to be overwritten: the old contents must stop being findable.
      if (blocks_[id].has_hash) uncache_block(id);
    } else {
      id = num_plain_ + overlay_.take_id();
      assert(id >= num_plain_ && "can_allocate promised an overlay id");
      ++num_overlay_allocations_;
    }
    blocks_[id].ref_count = 1;
    ids.push_back(id);
  }
  for (int32_t i = 0; i < num_staged; ++i) {
    blocks_[ids[i]].staging = lent[i];
    staging_owner_[static_cast<size_t>(lent[i])] = ids[i];
  }
  return ids;
}

void BlockPool::free_blocks(std::span<const int32_t> block_ids) {
  for (int32_t id : block_ids) {
    BlockEntry& block = blocks_[check_id(id)];
    assert(id != kNullBlock && "the null block is never freed");
    assert(block.ref_count > 0 && "block freed more often than referenced");
    if (--block.ref_count > 0) continue;
    if (block.staging >= 0) release_staging(id);
    if (is_overlay(id)) {
      uncache_block(id);
      overlay_.give_id(id - num_plain_);
      continue;
    }
    queue_insert_after(block.has_hash ? blocks_[tail_].prev_free : head_, id);
  }
}

void BlockPool::take_ref(int32_t block_id) {
  BlockEntry& block = blocks_[check_id(block_id)];
  assert(block_id != kNullBlock);
  assert((block.ref_count > 0 || !is_overlay(block_id)) && "a free overlay id is never found or shared");
  if (block.ref_count == 0) queue_remove(block_id);
  ++block.ref_count;
}

bool BlockPool::assign_staging(int32_t block_id) {
  BlockEntry& block = blocks_[check_id(block_id)];
  assert(block_id != kNullBlock && block.ref_count > 0 && block.staging < 0);
  const int32_t staging = overlay_.take_staging();
  if (staging < 0) return false;
  block.staging = staging;
  staging_owner_[static_cast<size_t>(block.staging)] = block_id;
  return true;
}

void BlockPool::release_staging(int32_t block_id) {
  BlockEntry& block = blocks_[check_id(block_id)];
  if (block.staging < 0) return;
  staging_owner_[static_cast<size_t>(block.staging)] = -1;
  overlay_.give_staging(block.staging);
  block.staging = -1;
}

bool BlockPool::is_free(int32_t block_id) const {
  if (is_overlay(check_id(block_id))) return blocks_[block_id].ref_count == 0;
  return blocks_[block_id].prev_free != kNoLink;
}

std::optional<uint64_t> BlockPool::block_hash(int32_t block_id) const {
  const BlockEntry& block = blocks_[check_id(block_id)];
  if (!block.has_hash) return std::nullopt;
  return block.hash;
}

std::optional<int32_t> BlockPool::find_cached_block(const BlockKey& key) const {
  if (!enable_prefix_caching_) return std::nullopt;
  auto [first, last] = cached_blocks_.equal_range(key.hash);
  for (auto it = first; it != last; ++it) {
    if (key_matches(it->second, key)) return it->second;
  }
  return std::nullopt;
}

void BlockPool::cache_block(int32_t block_id, const BlockKey& key) {
  assert(enable_prefix_caching_);
  BlockEntry& block = blocks_[check_id(block_id)];
  assert(block_id != kNullBlock && block.ref_count > 0 && !block.has_hash);
  assert(static_cast<int32_t>(key.token_ids.size()) == block_size_ && "only full blocks are cached");
  block.has_hash = true;
  block.hash = key.hash;
  block.parent_hash = key.parent_hash;
  block.extra_key = key.extra_key;
  std::copy(key.token_ids.begin(), key.token_ids.end(),
            cached_token_ids_.begin() + static_cast<size_t>(block_id) * block_size_);
  cached_blocks_.emplace(key.hash, block_id);
}

void BlockPool::uncache_block(int32_t block_id) {
  BlockEntry& block = blocks_[check_id(block_id)];
  if (!block.has_hash) return;
  auto [first, last] = cached_blocks_.equal_range(block.hash);
  for (auto it = first; it != last; ++it) {
    if (it->second == block_id) {
      cached_blocks_.erase(it);
      break;
    }
  }
  block.has_hash = false;
}

void BlockPool::record_prefix_cache_query(int64_t query_tokens, int64_t hit_tokens, int64_t query_blocks,
                                          int64_t hit_blocks) {
  ++stats_.num_queries;
  stats_.num_query_tokens += query_tokens;
  stats_.num_hit_tokens += hit_tokens;
  stats_.num_query_blocks += query_blocks;
  stats_.num_hit_blocks += hit_blocks;
}

std::vector<int32_t> BlockPool::free_queue() const {
  std::vector<int32_t> ids;
  for (int32_t id = blocks_[head_].next_free; id != tail_; id = blocks_[id].next_free) ids.push_back(id);
  return ids;
}

Status BlockPool::check_invariants() const {
  auto fail = [](const std::string& what, int32_t id) {
    return Status::error("block pool: " + what + " (block " + std::to_string(id) + ")");
  };
  // Walk the queue forwards, checking each backward link and each member's state.
  std::vector<char> in_queue(num_blocks_, 0);
  int32_t count = 0;
  int32_t previous = head_;
  for (int32_t id = blocks_[head_].next_free; id != tail_; previous = id, id = blocks_[id].next_free) {
    if (id < 0 || id >= num_blocks_) return fail("free queue links out of range", id);
    if (in_queue[id]) return fail("free queue has a cycle", id);
    if (blocks_[id].prev_free != previous) return fail("free queue backward link broken", id);
    if (blocks_[id].ref_count != 0) return fail("block both free and referenced", id);
    if (id == kNullBlock) return fail("null block in the free queue", id);
    in_queue[id] = 1;
    if (++count > num_blocks_) return fail("free queue longer than the pool", id);
  }
  if (blocks_[tail_].prev_free != previous) {
    return fail("tail sentinel's backward link broken", tail_);
  }
  if (count != num_free_blocks_)
    return fail("free count " + std::to_string(num_free_blocks_) + " but " + std::to_string(count) + " queued", -1);
  for (int32_t id = 0; id < num_blocks_; ++id) {
    const BlockEntry& block = blocks_[id];
    if (block.ref_count < 0) return fail("negative ref count", id);
    if (!in_queue[id] && (block.prev_free != kNoLink || block.next_free != kNoLink)) {
      return fail("block outside the queue keeps queue links", id);
    }
    if (is_overlay(id)) {
      if (in_queue[id]) return fail("overlay id in the free queue", id);
      if (overlay_.id_busy(id - num_plain_) != (block.ref_count > 0)) return fail("overlay id's busy flag stale", id);
      if (block.ref_count == 0 && block.has_hash) return fail("free overlay id keeps a hash", id);
    } else if (id != kNullBlock && !in_queue[id] && block.ref_count == 0) {
      return fail("block leaked", id);
    }
    if (id == kNullBlock && (block.ref_count != 0 || block.has_hash)) return fail("null block used", id);
    if (block.has_hash) {
      auto [first, last] = cached_blocks_.equal_range(block.hash);
      if (std::count_if(first, last, [&](const auto& entry) { return entry.second == id; }) != 1) {
        return fail("hashed block not in the hash map exactly once", id);
      }
    }
  }
  int32_t lent = 0;
  for (int32_t id = 0; id < num_blocks_; ++id) {
    const int32_t staging = blocks_[id].staging;
    if (staging < 0) continue;
    ++lent;
    if (staging >= num_staging() || staging_owner_[static_cast<size_t>(staging)] != id) {
      return fail("staging block " + std::to_string(staging) + " not owned by its block", id);
    }
    if (blocks_[id].ref_count == 0) return fail("free block keeps a staging block", id);
    if (!overlay_.staging_busy(staging)) return fail("lent staging block marked free", id);
  }
  int32_t busy = 0;
  for (int32_t staging = 0; staging < num_staging(); ++staging) busy += overlay_.staging_busy(staging) ? 1 : 0;
  if (lent != busy) return fail("staging blocks leaked", -1);
  if (Status s = overlay_.check_invariants(); !s) return s;
  for (const auto& [hash, id] : cached_blocks_) {
    if (id <= kNullBlock || id >= num_blocks_) return fail("hash map names no block", id);
    if (!blocks_[id].has_hash || blocks_[id].hash != hash) return fail("hash map entry stale", id);
  }
  return Status::ok();
}

int32_t BlockPool::check_id(int32_t block_id) const {
  assert(block_id >= 0 && block_id < num_blocks_ && "block id out of range");
  return block_id;
}

std::span<const int32_t> BlockPool::cached_tokens(int32_t block_id) const {
  return std::span<const int32_t>(cached_token_ids_).subspan(static_cast<size_t>(block_id) * block_size_, block_size_);
}

bool BlockPool::key_matches(int32_t block_id, const BlockKey& key) const {
  const BlockEntry& block = blocks_[block_id];
  return block.has_hash && block.hash == key.hash && block.parent_hash == key.parent_hash &&
         block.extra_key == key.extra_key && std::ranges::equal(cached_tokens(block_id), key.token_ids);
}

void BlockPool::queue_insert_after(int32_t position, int32_t block_id) {
  BlockEntry& block = blocks_[block_id];
  assert(block.prev_free == kNoLink && block.next_free == kNoLink && "block already queued");
  const int32_t next = blocks_[position].next_free;
  block.prev_free = position;
  block.next_free = next;
  blocks_[position].next_free = block_id;
  blocks_[next].prev_free = block_id;
  ++num_free_blocks_;
}

void BlockPool::queue_remove(int32_t block_id) {
  BlockEntry& block = blocks_[block_id];
  assert(block.prev_free != kNoLink && block.next_free != kNoLink && "block not queued");
  blocks_[block.prev_free].next_free = block.next_free;
  blocks_[block.next_free].prev_free = block.prev_free;
  block.prev_free = kNoLink;
  block.next_free = kNoLink;
  --num_free_blocks_;
}

}  // namespace folio
