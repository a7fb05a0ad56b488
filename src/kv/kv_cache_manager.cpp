#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <cassert>

#include "kv/kv_groups.h"

namespace folio {
namespace {

// Pools free a sequence's blocks in the order given; last block first makes the tail of a
// cached prefix the first to be evicted. Null entries (released window blocks) are skipped.
std::vector<int32_t> reversed(std::span<const int32_t> block_ids) {
  std::vector<int32_t> blocks;
  blocks.reserve(block_ids.size());
  for (auto it = block_ids.rbegin(); it != block_ids.rend(); ++it) {
    if (*it != BlockPool::kNullBlock) blocks.push_back(*it);
  }
  return blocks;
}

}  // namespace

KvCacheManager::KvCacheManager(const KvCacheConfig& config)
    : block_size_(config.block_size),
      windows_(config.group_windows.empty() ? std::vector<int32_t>{0} : config.group_windows),
      device_pool_(config.num_blocks, config.block_size, config.enable_prefix_caching, config.num_staging_blocks,
                   config.num_overlay_blocks, config.bytes_per_staging_block, config.bytes_per_block),
      // Host blocks are never looked up by hash: a swapped sequence comes back whole.
      host_pool_(std::max(1, config.num_host_blocks), config.block_size, false,
                 config.num_staging_blocks > 0 ? config.num_host_staging_blocks : 0) {}

uint64_t KvCacheManager::group_extra_key(uint64_t extra_key, int32_t group) {
  if (group == 0) return extra_key;  // one group: the keys every single-group cache had
  const uint64_t keys[2] = {extra_key, static_cast<uint64_t>(group)};
  return hash_extra_keys(keys);
}

const GroupPrefixMatch* KvCacheManager::group_match(const PrefixMatch& prefix, int32_t group,
                                                    GroupPrefixMatch& scratch) {
  if (group == 0) {
    scratch.block_ids = prefix.block_ids;
    scratch.block_hashes = prefix.block_hashes;
    return &scratch;
  }
  if (static_cast<size_t>(group - 1) >= prefix.more_groups.size()) return nullptr;
  return &prefix.more_groups[static_cast<size_t>(group - 1)];
}

int32_t KvCacheManager::num_out_of_window(const GroupBlocks& group_state, int32_t group, int32_t position) const {
  const int32_t window = group_window(group);
  if (window <= 0) return 0;
  return std::min(first_block_in_window(position, window, block_size_),
                  static_cast<int32_t>(group_state.block_table.size()));
}

// ---- prefix cache ---------------------------------------------------------------------------

PrefixMatch KvCacheManager::find_cached_prefix(std::span<const int32_t> token_ids, uint64_t extra_key) const {
  PrefixMatch match;
  match.extra_key = extra_key;
  match.num_query_tokens = static_cast<int32_t>(token_ids.size());
  if (!device_pool_.prefix_caching_enabled() || token_ids.empty()) return match;
  // The last token is left out: it must go through the model to produce the next logits.
  match.num_query_blocks = (match.num_query_tokens - 1) / block_size_;
  const auto block_tokens = [&](int32_t index) {
    return token_ids.subspan(static_cast<size_t>(index) * block_size_, block_size_);
  };
  // Every group's chain of keys, and which blocks of it are cached. A full group needs every
  // block from 0 (it stops at the first miss); a window group only the blocks inside the
  // window of the first token it would compute. Full groups come first (kv_groups_for), so
  // window groups look only as far as the full ones hit.
  //
  // A window group's lookup may start past block 0, at a parent hash nobody verified: a hit
  // there rests on the 64-bit chain alone (block_hash.h: ~n^2 / 2^65), not on an exact walk.
  const int32_t groups = num_groups();
  std::vector<std::vector<uint64_t>> hashes(static_cast<size_t>(groups));
  std::vector<std::vector<int32_t>> found(static_cast<size_t>(groups));
  int32_t hit = match.num_query_blocks;
  for (int32_t g = 0; g < groups; ++g) {
    const uint64_t key_extra = group_extra_key(extra_key, g);
    uint64_t parent_hash = kRootBlockHash;
    for (int32_t index = 0; index < hit; ++index) {
      const BlockKey key = make_block_key(parent_hash, block_tokens(index), key_extra);
      const std::optional<int32_t> block = device_pool_.find_cached_block(key);
      hashes[g].push_back(key.hash);
      found[g].push_back(block.value_or(BlockPool::kNullBlock));
      parent_hash = key.hash;
      if (group_window(g) == 0 && !block) {
        hit = index;  // a chain: block i + 1 can't be right if block i is missing
        break;
      }
    }
  }
  // The longest hit every window group can serve: blocks [first in window, hit) all cached.
  // Shrinking the hit moves the window back, so repeat until no group shrinks it.
  for (bool changed = true; changed && hit > 0;) {
    changed = false;
    for (int32_t g = 0; g < groups; ++g) {
      if (group_window(g) == 0) continue;
      int32_t k = std::min<int32_t>(hit, static_cast<int32_t>(found[g].size()));
      for (; k > 0; --k) {
        const int32_t first = first_block_in_window(k * block_size_, group_window(g), block_size_);
        bool all = true;
        for (int32_t index = first; index < k && all; ++index) all = found[g][index] != BlockPool::kNullBlock;
        if (all) break;
      }
      if (k < hit) hit = k, changed = true;
    }
  }
  for (int32_t g = 0; g < groups; ++g) {
    GroupPrefixMatch group;
    const int32_t first = first_block_in_window(hit * block_size_, group_window(g), block_size_);
    for (int32_t index = 0; index < hit; ++index) {
      group.block_ids.push_back(index < first ? BlockPool::kNullBlock : found[g][index]);
      group.block_hashes.push_back(hashes[g][index]);
    }
    if (g == 0) {
      match.block_ids = std::move(group.block_ids);
      match.block_hashes = std::move(group.block_hashes);
    } else {
      match.more_groups.push_back(std::move(group));
    }
  }
  match.num_computed_tokens = hit * block_size_;
  return match;
}

void KvCacheManager::cache_full_blocks(SequenceId sequence, std::span<const int32_t> token_ids) {
  SequenceBlocks& state = running(sequence);
  const int32_t num_full_blocks =
      std::min<int32_t>(static_cast<int32_t>(token_ids.size()), state.num_tokens) / block_size_;
  for (int32_t g = 0; g < num_groups(); ++g) {
    GroupBlocks& group = state.groups[static_cast<size_t>(g)];
    if (has_residual()) {
      // The pass that filled these blocks sealed them; staged blocks are a suffix of the table.
      for (int32_t index = std::min<int32_t>(num_full_blocks, static_cast<int32_t>(group.block_table.size())) - 1;
           index >= 0 && group.block_table[index] != BlockPool::kNullBlock &&
           device_pool_.staging(group.block_table[index]) >= 0;
           --index) {
        device_pool_.release_staging(group.block_table[index]);
      }
    }
    if (!device_pool_.prefix_caching_enabled()) continue;
    const uint64_t key_extra = group_extra_key(state.extra_key, g);
    for (int32_t index = group.num_cached_blocks; index < num_full_blocks; ++index) {
      const uint64_t parent_hash = index == 0 ? kRootBlockHash : group.block_hashes[index - 1];
      const BlockKey key = make_block_key(
          parent_hash, token_ids.subspan(static_cast<size_t>(index) * block_size_, block_size_), key_extra);
      if (index < static_cast<int32_t>(group.block_hashes.size())) {
        assert(group.block_hashes[index] == key.hash && "the sequence's tokens changed");
      } else {
        group.block_hashes.push_back(key.hash);
      }
      const int32_t block = group.block_table[index];
      if (block == BlockPool::kNullBlock) continue;  // released: only its hash is kept, for the chain
      // A fork shares full blocks; the sibling that got here first already registered it.
      if (const std::optional<uint64_t> hash = device_pool_.block_hash(block)) {
        assert(*hash == key.hash && "shared block registered with other contents");
        continue;
      }
      device_pool_.cache_block(block, key);
    }
    group.num_cached_blocks = std::max(group.num_cached_blocks, num_full_blocks);
  }
}

// ---- allocation -----------------------------------------------------------------------------

std::optional<KvCacheManager::AllocationPlan> KvCacheManager::plan_allocation(SequenceId sequence,
                                                                              int32_t num_new_tokens,
                                                                              const PrefixMatch& prefix) const {
  assert(num_new_tokens >= 0);
  AllocationPlan plan;
  plan.new_blocks.assign(static_cast<size_t>(num_groups()), 0);
  plan.copy_on_write.assign(static_cast<size_t>(num_groups()), 0);
  const auto it = sequences_.find(sequence);
  if (it == sequences_.end()) {
    const int32_t total_tokens = prefix.num_computed_tokens + num_new_tokens;
    GroupPrefixMatch scratch;
    for (int32_t g = 0; g < num_groups(); ++g) {
      const GroupPrefixMatch* group = group_match(prefix, g, scratch);
      const size_t hits = group == nullptr ? 0 : group->block_ids.size();
      if (static_cast<int32_t>(hits) * block_size_ != prefix.num_computed_tokens) return std::nullopt;
      // The match is only a view of the cache at lookup time; confirm it still holds.
      for (size_t index = 0; index < hits; ++index) {
        const int32_t block = group->block_ids[index];
        if (block == BlockPool::kNullBlock) continue;
        if (device_pool_.block_hash(block) != group->block_hashes[index]) return std::nullopt;
        if (device_pool_.is_free(block)) ++plan.num_prefix_blocks_free;
      }
      plan.new_blocks[g] = blocks_for_tokens(total_tokens) - static_cast<int32_t>(hits);
      plan.num_blocks_to_allocate += plan.new_blocks[g];
    }
    return plan;
  }
  const SequenceBlocks& state = it->second;
  assert(prefix.block_ids.empty() && "a prefix match only applies to a new sequence");
  if (state.swapped) return std::nullopt;
  const int32_t total_tokens = state.num_tokens + num_new_tokens;
  for (int32_t g = 0; g < num_groups(); ++g) {
    const GroupBlocks& group = state.groups[static_cast<size_t>(g)];
    plan.new_blocks[g] = std::max(0, blocks_for_tokens(total_tokens) - static_cast<int32_t>(group.block_table.size()));
    // Writes start at position num_tokens; if that is inside a block another table also holds,
    // the block must be copied first. Only the last block can be partial, so only it is checked
    // (it is always inside the window of the token written into it: never released).
    if (num_new_tokens > 0 && state.num_tokens % block_size_ != 0) {
      const int32_t block = group.block_table[state.num_tokens / block_size_];
      plan.copy_on_write[g] = device_pool_.ref_count(block) > 1;
    }
    plan.num_blocks_to_allocate += plan.new_blocks[g] + (plan.copy_on_write[g] ? 1 : 0);
  }
  return plan;
}

bool KvCacheManager::can_allocate_slots(SequenceId sequence, int32_t num_new_tokens, const PrefixMatch& prefix) const {
  const std::optional<AllocationPlan> plan = plan_allocation(sequence, num_new_tokens, prefix);
  // Prefix blocks sitting in the free queue leave it when referenced, so they can't also be
  // handed out as new blocks.
  // New blocks are empty, so unsealed until they fill: each borrows a staging block.
  return plan &&
         device_pool_.can_allocate(plan->num_blocks_to_allocate, has_residual() ? plan->num_blocks_to_allocate : 0,
                                   plan->num_prefix_blocks_free);
}

void KvCacheManager::release_out_of_window(SequenceId sequence, int32_t position) {
  const auto it = sequences_.find(sequence);
  if (it == sequences_.end() || it->second.swapped) return;
  SequenceBlocks& state = it->second;
  assert(position <= state.num_tokens);
  for (int32_t g = 0; g < num_groups(); ++g) {
    GroupBlocks& group = state.groups[static_cast<size_t>(g)];
    const int32_t released = num_out_of_window(group, g, position);
    // Oldest first, so the oldest are evicted first: a later prompt sharing this prefix hits
    // where its window ends, on the newest of them.
    std::vector<int32_t> blocks;
    for (int32_t index = 0; index < released; ++index) {
      int32_t& block = group.block_table[static_cast<size_t>(index)];
      if (block == BlockPool::kNullBlock) continue;  // released before
      blocks.push_back(block);
      block = BlockPool::kNullBlock;
    }
    device_pool_.free_blocks(blocks);
  }
}

bool KvCacheManager::allocate_slots(SequenceId sequence, int32_t num_new_tokens, const PrefixMatch& prefix) {
  assert(!is_swapped(sequence) && "swap a sequence in before allocating for it");
  assert(prefix.block_ids.size() == prefix.block_hashes.size());
  if (!can_allocate_slots(sequence, num_new_tokens, prefix)) return false;
  const AllocationPlan plan = *plan_allocation(sequence, num_new_tokens, prefix);

  const bool is_new = !sequences_.contains(sequence);
  SequenceBlocks& state = sequences_[sequence];
  if (is_new) {
    state.groups.resize(static_cast<size_t>(num_groups()));
    state.num_tokens = prefix.num_computed_tokens;
    state.extra_key = prefix.extra_key;
    GroupPrefixMatch scratch;
    for (int32_t g = 0; g < num_groups(); ++g) {
      const GroupPrefixMatch* match = group_match(prefix, g, scratch);
      if (match == nullptr) continue;
      GroupBlocks& group = state.groups[static_cast<size_t>(g)];
      // References first: the prefix blocks must leave the free queue before allocate() could
      // pick (and evict) them.
      for (int32_t block : match->block_ids) {
        if (block != BlockPool::kNullBlock) device_pool_.take_ref(block);
      }
      group.block_table = match->block_ids;
      group.block_hashes = match->block_hashes;
      group.num_cached_blocks = static_cast<int32_t>(match->block_ids.size());
    }
    if (device_pool_.prefix_caching_enabled() && prefix.num_query_tokens > 0) {
      device_pool_.record_prefix_cache_query(prefix.num_query_tokens, prefix.num_computed_tokens,
                                             prefix.num_query_blocks, static_cast<int32_t>(prefix.block_ids.size()));
    }
  }
  std::optional<std::vector<int32_t>> blocks =
      device_pool_.allocate(plan.num_blocks_to_allocate, has_residual() ? plan.num_blocks_to_allocate : 0);
  assert(blocks && "can_allocate_slots promised room");
  auto next_block = blocks->begin();
  for (int32_t g = 0; g < num_groups(); ++g) {
    GroupBlocks& group = state.groups[static_cast<size_t>(g)];
    if (plan.copy_on_write[g]) {
      int32_t& shared = group.block_table[state.num_tokens / block_size_];
      pending_copies_.push_back({BlockCopyDirection::kDeviceToDevice, shared, *next_block, device_pool_.staging(shared),
                                 device_pool_.staging(*next_block)});
      const int32_t released = shared;
      shared = *next_block++;
      // Another table still holds it (ref_count was > 1), so this never frees it.
      device_pool_.free_blocks({&released, 1});
      ++num_copy_on_write_blocks_;
    } else if (num_new_tokens > 0 && state.num_tokens % block_size_ != 0) {
      // Only this table holds the block about to be written. It may still be findable (after a
      // truncate, its old tail is valid K/V); writing makes that identity false.
      device_pool_.uncache_block(group.block_table[state.num_tokens / block_size_]);
    }
    group.block_table.insert(group.block_table.end(), next_block, next_block + plan.new_blocks[g]);
    next_block += plan.new_blocks[g];
  }
  assert(next_block == blocks->end());
  state.num_tokens += num_new_tokens;
  return true;
}

void KvCacheManager::truncate(SequenceId sequence, int32_t num_tokens) {
  SequenceBlocks& state = running(sequence);
  assert(num_tokens >= 0 && num_tokens <= state.num_tokens);
  const int32_t keep_blocks = blocks_for_tokens(num_tokens);
  const int32_t num_full_blocks = num_tokens / block_size_;
  for (GroupBlocks& group : state.groups) {
    if (keep_blocks < static_cast<int32_t>(group.block_table.size())) {
      const std::span<const int32_t> dropped = std::span<const int32_t>(group.block_table).subspan(keep_blocks);
      device_pool_.free_blocks(reversed(dropped));
      group.block_table.resize(keep_blocks);
    }
    assert((keep_blocks == 0 || group.block_table.back() != BlockPool::kNullBlock) &&
           "truncating into released blocks");
    assert((!has_residual() || num_tokens % block_size_ == 0 || device_pool_.staging(group.block_table.back()) >= 0) &&
           "truncating into a sealed block");
    group.num_cached_blocks = std::min(group.num_cached_blocks, num_full_blocks);
    if (static_cast<int32_t>(group.block_hashes.size()) > num_full_blocks) group.block_hashes.resize(num_full_blocks);
  }
  state.num_tokens = num_tokens;
  // The partial block at the new end keeps its hash: its K/V are still valid and findable
  // until allocate_slots writes into it (copying it first if shared, uncaching it if not).
}

void KvCacheManager::free(SequenceId sequence) {
  const auto it = sequences_.find(sequence);
  if (it == sequences_.end()) return;
  const SequenceBlocks& state = it->second;
  for (const GroupBlocks& group : state.groups) {
    if (state.swapped) {
      host_pool_.free_blocks(reversed(group.host_block_table));
    } else {
      device_pool_.free_blocks(reversed(group.block_table));
    }
  }
  sequences_.erase(it);
}

void KvCacheManager::fork(SequenceId parent, SequenceId child) {
  assert(!sequences_.contains(child) && "fork into an existing sequence");
  const SequenceBlocks parent_state = running(parent);  // a copy: emplacing may rehash
  for (const GroupBlocks& group : parent_state.groups) {
    for (int32_t block : group.block_table) {
      if (block != BlockPool::kNullBlock) device_pool_.take_ref(block);
    }
  }
  sequences_.emplace(child, parent_state);
}

std::vector<BlockCopy> KvCacheManager::take_pending_copies() {
  std::vector<BlockCopy> copies;
  copies.swap(pending_copies_);
  return copies;
}

// ---- tables and slots -------------------------------------------------------------------------

bool KvCacheManager::is_swapped(SequenceId sequence) const {
  const auto it = sequences_.find(sequence);
  return it != sequences_.end() && it->second.swapped;
}

int32_t KvCacheManager::num_tokens(SequenceId sequence) const {
  return at(sequence).num_tokens;
}

std::span<const int32_t> KvCacheManager::block_table(SequenceId sequence, int32_t group) const {
  return at(sequence).groups[static_cast<size_t>(group)].block_table;
}

std::span<const int32_t> KvCacheManager::host_block_table(SequenceId sequence, int32_t group) const {
  return at(sequence).groups[static_cast<size_t>(group)].host_block_table;
}

int32_t KvCacheManager::num_blocks_held(SequenceId sequence) const {
  const SequenceBlocks& state = at(sequence);
  int32_t held = 0;
  for (const GroupBlocks& group : state.groups) {
    held += static_cast<int32_t>(reversed(state.swapped ? group.host_block_table : group.block_table).size());
  }
  return held;
}

int32_t KvCacheManager::slot(SequenceId sequence, int32_t position, int32_t group) const {
  const SequenceBlocks& state = at(sequence);
  assert(!state.swapped && position >= 0 && position < state.num_tokens && "no slot reserved there");
  const int32_t block = state.groups[static_cast<size_t>(group)].block_table[position / block_size_];
  assert(block != BlockPool::kNullBlock && "that position's block was released");
  return block * block_size_ + position % block_size_;
}

void KvCacheManager::append_slot_mapping(SequenceId sequence, int32_t first_position, int32_t count,
                                         std::vector<int32_t>& slots, int32_t group) const {
  for (int32_t position = first_position; position < first_position + count; ++position) {
    slots.push_back(slot(sequence, position, group));
  }
}

int32_t KvCacheManager::staged_blocks(SequenceId sequence, std::vector<int32_t>* staging, int32_t group) const {
  const std::vector<int32_t>& table = at(sequence).groups[static_cast<size_t>(group)].block_table;
  int32_t first = static_cast<int32_t>(table.size());
  while (first > 0 && table[first - 1] != BlockPool::kNullBlock && device_pool_.staging(table[first - 1]) >= 0) --first;
  if (staging != nullptr) {
    for (size_t index = first; index < table.size(); ++index) staging->push_back(device_pool_.staging(table[index]));
  }
  return first;
}

KvCacheMetrics KvCacheManager::metrics() const {
  KvCacheMetrics metrics;
  metrics.num_blocks = device_pool_.num_usable_blocks();
  metrics.num_used_blocks = device_pool_.num_used_blocks();
  metrics.num_free_blocks = device_pool_.num_free_blocks();
  metrics.num_cached_blocks = device_pool_.num_cached_blocks();
  metrics.num_overlay_blocks = device_pool_.num_blocks() - device_pool_.num_plain_blocks();
  metrics.num_used_overlay_blocks = device_pool_.num_used_overlay_blocks();
  metrics.num_overlay_allocations = device_pool_.num_overlay_allocations();
  metrics.usage = device_pool_.usage();
  // A shared block holds as many tokens as its fullest holder has written into it.
  std::vector<int32_t> filled(device_pool_.num_blocks(), 0);
  for (const auto& [id, state] : sequences_) {
    metrics.num_swapped_sequences += state.swapped ? 1 : 0;
    for (const GroupBlocks& group : state.groups) {
      for (size_t index = 0; index < group.block_table.size(); ++index) {
        const int32_t tokens =
            std::min<int32_t>(block_size_, state.num_tokens - static_cast<int32_t>(index) * block_size_);
        filled[group.block_table[index]] = std::max(filled[group.block_table[index]], tokens);
      }
    }
  }
  filled[BlockPool::kNullBlock] = 0;
  for (int32_t tokens : filled) metrics.num_tokens_held += tokens;
  metrics.num_token_slots = static_cast<int64_t>(metrics.num_used_blocks) * block_size_;
  metrics.kv_utilization =
      metrics.num_token_slots == 0 ? 1.0 : static_cast<double>(metrics.num_tokens_held) / metrics.num_token_slots;
  metrics.num_host_blocks = host_pool_.num_usable_blocks();
  metrics.num_used_host_blocks = host_pool_.num_used_blocks();
  metrics.num_sequences = static_cast<int32_t>(sequences_.size());
  metrics.num_copy_on_write_blocks = num_copy_on_write_blocks_;
  metrics.num_swapped_out_blocks = num_swapped_out_blocks_;
  metrics.num_swapped_in_blocks = num_swapped_in_blocks_;
  metrics.prefix_cache = device_pool_.prefix_cache_stats();
  return metrics;
}

KvCacheManager::SequenceBlocks& KvCacheManager::running(SequenceId sequence) {
  const auto it = sequences_.find(sequence);
  assert(it != sequences_.end() && !it->second.swapped && "sequence unknown or swapped out");
  return it->second;
}

const KvCacheManager::SequenceBlocks& KvCacheManager::at(SequenceId sequence) const {
  const auto it = sequences_.find(sequence);
  assert(it != sequences_.end() && "unknown sequence");
  return it->second;
}

}  // namespace folio
