// KvCacheManager::check_invariants: what the tests (and the engine's debug checks) hold the
// bookkeeping to after every step.
#include <algorithm>
#include <string>

#include "kv/kv_cache_manager.h"
#include "kv/kv_groups.h"

namespace folio {
namespace {

std::string sequence_name(SequenceId sequence) {
  return "sequence " + std::to_string(sequence);
}

}  // namespace

Status KvCacheManager::check_tables(const BlockPool& pool, bool host) const {
  const std::string where = host ? "host table of " : "table of ";
  std::vector<int32_t> holders(pool.num_blocks(), 0);
  for (const auto& [id, state] : sequences_) {
    std::vector<int32_t> sorted;
    for (int32_t g = 0; g < num_groups(); ++g) {
      const GroupBlocks& group = state.groups[static_cast<size_t>(g)];
      const std::vector<int32_t>& table = host ? group.host_block_table : group.block_table;
      // Released window blocks: a leading run of nulls, none where a query may still look.
      const auto nulls = static_cast<int32_t>(std::ranges::count(table, BlockPool::kNullBlock));
      const int32_t leading = static_cast<int32_t>(
          std::ranges::find_if(table, [](int32_t b) { return b != BlockPool::kNullBlock; }) - table.begin());
      if (nulls > 0 && (group_window(g) == 0 || nulls != leading ||
                        nulls > first_block_in_window(state.num_tokens, group_window(g), block_size_))) {
        return Status::error(where + sequence_name(id) + " holds the null block in group " + std::to_string(g) +
                             " at entries a query can read");
      }
      for (int32_t block : table) {
        if (block == BlockPool::kNullBlock) continue;
        if (block < 0 || block >= pool.num_blocks()) {
          return Status::error(where + sequence_name(id) + " holds block " + std::to_string(block));
        }
        sorted.push_back(block);
        ++holders[block];
      }
    }
    std::ranges::sort(sorted);
    if (std::ranges::adjacent_find(sorted) != sorted.end()) {
      return Status::error(where + sequence_name(id) + " holds a block twice");
    }
  }
  for (int32_t block = 1; block < pool.num_blocks(); ++block) {
    if (holders[block] != pool.ref_count(block)) {
      return Status::error(std::string(host ? "host " : "") + "block " + std::to_string(block) + " has ref count " +
                           std::to_string(pool.ref_count(block)) + " but " + std::to_string(holders[block]) +
                           " tables hold it");
    }
  }
  return Status::ok();
}

Status KvCacheManager::check_staging(SequenceId id, const SequenceBlocks& state) const {
  if (!has_residual()) return Status::ok();
  const BlockPool& pool = state.swapped ? host_pool_ : device_pool_;
  for (const GroupBlocks& group : state.groups) {
    const std::vector<int32_t>& table = state.swapped ? group.host_block_table : group.block_table;
    bool staged = false;
    for (int32_t block : table) {
      const bool this_staged = block != BlockPool::kNullBlock && pool.staging(block) >= 0;
      if (staged && !this_staged) return Status::error(sequence_name(id) + ": a sealed block after an unsealed one");
      staged = this_staged;
    }
    if (state.num_tokens % block_size_ != 0 && !staged) {
      return Status::error(sequence_name(id) + ": its partial last block is sealed");
    }
  }
  return Status::ok();
}

Status KvCacheManager::check_sequence(SequenceId id, const SequenceBlocks& state) const {
  if (static_cast<int32_t>(state.groups.size()) != num_groups()) {
    return Status::error(sequence_name(id) + ": " + std::to_string(state.groups.size()) + " tables for " +
                         std::to_string(num_groups()) + " groups");
  }
  for (int32_t g = 0; g < num_groups(); ++g) {
    const GroupBlocks& group = state.groups[static_cast<size_t>(g)];
    const std::vector<int32_t>& table = state.swapped ? group.host_block_table : group.block_table;
    const std::vector<int32_t>& other = state.swapped ? group.block_table : group.host_block_table;
    if (static_cast<int32_t>(table.size()) != blocks_for_tokens(state.num_tokens) || !other.empty()) {
      return Status::error(sequence_name(id) + ": table size doesn't match " + std::to_string(state.num_tokens) +
                           " tokens");
    }
    if (group.num_cached_blocks > state.num_tokens / block_size_ ||
        group.num_cached_blocks > static_cast<int32_t>(group.block_hashes.size())) {
      return Status::error(sequence_name(id) + ": more blocks cached than full");
    }
    if (state.swapped) continue;
    for (int32_t index = 0; index < group.num_cached_blocks; ++index) {
      const int32_t block = group.block_table[index];
      if (block != BlockPool::kNullBlock && device_pool_.block_hash(block) != group.block_hashes[index]) {
        return Status::error(sequence_name(id) + ": block " + std::to_string(index) + " of group " + std::to_string(g) +
                             " lost its hash");
      }
    }
  }
  return check_staging(id, state);
}

Status KvCacheManager::check_invariants() const {
  for (const BlockPool* pool : {&device_pool_, &host_pool_}) {
    if (Status status = pool->check_invariants(); !status) return status;
  }
  if (Status status = check_tables(device_pool_, false); !status) return status;
  if (Status status = check_tables(host_pool_, true); !status) return status;
  for (const auto& [id, state] : sequences_) {
    if (Status status = check_sequence(id, state); !status) return status;
  }
  return Status::ok();
}

}  // namespace folio
