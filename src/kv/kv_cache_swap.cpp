// KvCacheManager's swapping (preemption by swap): a family of sequences moves to host blocks
// and back as one, each distinct block once, every group's tables together. Released window
// blocks stay released: their null entries are carried as they are.
#include <algorithm>
#include <unordered_map>

#include "kv/kv_cache_manager.h"

namespace folio {

std::optional<std::vector<int32_t>> KvCacheManager::distinct_blocks(std::span<const SequenceId> sequences,
                                                                    bool swapped) const {
  std::vector<int32_t> blocks;
  std::vector<char> seen((swapped ? host_pool_ : device_pool_).num_blocks(), 0);
  seen[BlockPool::kNullBlock] = 1;
  for (size_t index = 0; index < sequences.size(); ++index) {
    const auto it = sequences_.find(sequences[index]);
    if (it == sequences_.end() || it->second.swapped != swapped) return std::nullopt;
    if (std::find(sequences.begin(), sequences.begin() + index, sequences[index]) != sequences.begin() + index) {
      return std::nullopt;  // listed twice
    }
    for (const GroupBlocks& group : it->second.groups) {
      for (int32_t block : swapped ? group.host_block_table : group.block_table) {
        if (!seen[block]) blocks.push_back(block);
        seen[block] = 1;
      }
    }
  }
  return blocks;
}

int32_t KvCacheManager::count_staged(const BlockPool& pool, std::span<const int32_t> blocks) const {
  return static_cast<int32_t>(std::ranges::count_if(blocks, [&](int32_t block) { return pool.staging(block) >= 0; }));
}

bool KvCacheManager::can_swap_out(std::span<const SequenceId> sequences) const {
  const std::optional<std::vector<int32_t>> blocks = distinct_blocks(sequences, false);
  return blocks && static_cast<int32_t>(blocks->size()) <= host_pool_.num_free_blocks() &&
         count_staged(device_pool_, *blocks) <= host_pool_.num_free_staging();
}

bool KvCacheManager::can_swap_in(std::span<const SequenceId> sequences) const {
  const std::optional<std::vector<int32_t>> blocks = distinct_blocks(sequences, true);
  return blocks && device_pool_.can_allocate(static_cast<int32_t>(blocks->size()), count_staged(host_pool_, *blocks));
}

namespace {

// Moves one table's entries through `other_of` (block in the old pool -> block in the new),
// each new block referenced once per table holding it; null entries stay null.
void move_table(std::vector<int32_t>& from, std::vector<int32_t>& to,
                const std::unordered_map<int32_t, int32_t>& other_of, std::vector<char>& referenced,
                BlockPool& to_pool) {
  for (int32_t block : from) {
    if (block == BlockPool::kNullBlock) {
      to.push_back(BlockPool::kNullBlock);
      continue;
    }
    const int32_t moved = other_of.at(block);
    // allocate() gave each new block its first reference; further tables add theirs.
    if (referenced[moved]) to_pool.take_ref(moved);
    referenced[moved] = 1;
    to.push_back(moved);
  }
}

std::vector<int32_t> newest_first(std::span<const int32_t> table) {
  std::vector<int32_t> blocks;
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    if (*it != BlockPool::kNullBlock) blocks.push_back(*it);
  }
  return blocks;
}

}  // namespace

bool KvCacheManager::swap_out(std::span<const SequenceId> sequences) {
  if (!can_swap_out(sequences)) return false;
  const std::vector<int32_t> device_blocks = *distinct_blocks(sequences, false);
  const std::vector<int32_t> host_blocks = *host_pool_.allocate(static_cast<int32_t>(device_blocks.size()));
  std::unordered_map<int32_t, int32_t> host_of;  // device block -> host block
  for (size_t index = 0; index < device_blocks.size(); ++index) {
    host_of.emplace(device_blocks[index], host_blocks[index]);
    const int32_t staging = device_pool_.staging(device_blocks[index]);
    if (staging >= 0) host_pool_.assign_staging(host_blocks[index]);
    pending_copies_.push_back({BlockCopyDirection::kDeviceToHost, device_blocks[index], host_blocks[index], staging,
                               host_pool_.staging(host_blocks[index])});
  }
  std::vector<char> host_block_referenced(host_pool_.num_blocks(), 0);
  for (SequenceId sequence : sequences) {
    SequenceBlocks& state = sequences_.at(sequence);
    for (GroupBlocks& group : state.groups) {
      move_table(group.block_table, group.host_block_table, host_of, host_block_referenced, host_pool_);
      device_pool_.free_blocks(newest_first(group.block_table));
      group.block_table.clear();
      // The device blocks' hashes stay in the pool (cached free) until evicted; this sequence's
      // future blocks aren't registered, so it re-registers everything after swapping in.
      group.num_cached_blocks = 0;
    }
    state.swapped = true;
  }
  num_swapped_out_blocks_ += static_cast<int64_t>(device_blocks.size());
  return true;
}

bool KvCacheManager::swap_in(std::span<const SequenceId> sequences) {
  if (!can_swap_in(sequences)) return false;
  const std::vector<int32_t> host_blocks = *distinct_blocks(sequences, true);
  // The pool lends staging blocks to the first num_staged blocks it hands out (taking them before
  // any overlay id): unsealed host blocks get those, sealed ones the rest.
  const int32_t num_staged = count_staged(host_pool_, host_blocks);
  const std::vector<int32_t> device_blocks =
      *device_pool_.allocate(static_cast<int32_t>(host_blocks.size()), num_staged);
  std::unordered_map<int32_t, int32_t> device_of;  // host block -> device block
  size_t next_staged = 0, next_sealed = static_cast<size_t>(num_staged);
  for (const int32_t host_block : host_blocks) {
    const int32_t staging = host_pool_.staging(host_block);
    const int32_t device_block = device_blocks[staging >= 0 ? next_staged++ : next_sealed++];
    device_of.emplace(host_block, device_block);
    pending_copies_.push_back(
        {BlockCopyDirection::kHostToDevice, host_block, device_block, staging, device_pool_.staging(device_block)});
  }
  std::vector<char> device_block_referenced(device_pool_.num_blocks(), 0);
  for (SequenceId sequence : sequences) {
    SequenceBlocks& state = sequences_.at(sequence);
    for (GroupBlocks& group : state.groups) {
      move_table(group.host_block_table, group.block_table, device_of, device_block_referenced, device_pool_);
      host_pool_.free_blocks(newest_first(group.host_block_table));
      group.host_block_table.clear();
    }
    state.swapped = false;
  }
  num_swapped_in_blocks_ += static_cast<int64_t>(host_blocks.size());
  return true;
}

}  // namespace folio
