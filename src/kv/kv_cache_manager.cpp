#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <cassert>
#include <string>

namespace folio {
namespace {

// Pools free a sequence's blocks in the order given; last block first makes the tail of a
// cached prefix the first to be evicted.
std::vector<int32_t> reversed(std::span<const int32_t> block_ids) {
  return std::vector<int32_t>(block_ids.rbegin(), block_ids.rend());
}

std::string sequence_name(SequenceId sequence) {
  return "sequence " + std::to_string(sequence);
}

}  // namespace

KvCacheManager::KvCacheManager(const KvCacheConfig& config)
    : block_size_(config.block_size),
      device_pool_(config.num_blocks, config.block_size, config.enable_prefix_caching, config.num_staging_blocks),
      // Host blocks are never looked up by hash: a swapped sequence comes back whole.
      host_pool_(std::max(1, config.num_host_blocks), config.block_size, false,
                 config.num_staging_blocks > 0 ? config.num_host_staging_blocks : 0) {}

// ---- prefix cache ---------------------------------------------------------------------------

PrefixMatch KvCacheManager::find_cached_prefix(std::span<const int32_t> token_ids, uint64_t extra_key) const {
  PrefixMatch match;
  match.extra_key = extra_key;
  match.num_query_tokens = static_cast<int32_t>(token_ids.size());
  if (!device_pool_.prefix_caching_enabled() || token_ids.empty()) return match;
  // The last token is left out: it must go through the model to produce the next logits.
  match.num_query_blocks = (match.num_query_tokens - 1) / block_size_;
  uint64_t parent_hash = kRootBlockHash;
  for (int32_t index = 0; index < match.num_query_blocks; ++index) {
    const BlockKey key = make_block_key(
        parent_hash, token_ids.subspan(static_cast<size_t>(index) * block_size_, block_size_), extra_key);
    const std::optional<int32_t> block = device_pool_.find_cached_block(key);
    if (!block) break;  // a chain: block i + 1 can't be right if block i is missing
    match.block_ids.push_back(*block);
    match.block_hashes.push_back(key.hash);
    parent_hash = key.hash;
  }
  match.num_computed_tokens = static_cast<int32_t>(match.block_ids.size()) * block_size_;
  return match;
}

void KvCacheManager::cache_full_blocks(SequenceId sequence, std::span<const int32_t> token_ids) {
  SequenceBlocks& state = running(sequence);
  const int32_t num_full_blocks =
      std::min<int32_t>(static_cast<int32_t>(token_ids.size()), state.num_tokens) / block_size_;
  if (has_residual()) {
    // The pass that filled these blocks sealed them; staged blocks are a suffix of the table.
    for (int32_t index = std::min<int32_t>(num_full_blocks, static_cast<int32_t>(state.block_table.size())) - 1;
         index >= 0 && device_pool_.staging(state.block_table[index]) >= 0; --index) {
      device_pool_.release_staging(state.block_table[index]);
    }
  }
  if (!device_pool_.prefix_caching_enabled()) return;
  for (int32_t index = state.num_cached_blocks; index < num_full_blocks; ++index) {
    const uint64_t parent_hash = index == 0 ? kRootBlockHash : state.block_hashes[index - 1];
    const BlockKey key = make_block_key(
        parent_hash, token_ids.subspan(static_cast<size_t>(index) * block_size_, block_size_), state.extra_key);
    if (index < static_cast<int32_t>(state.block_hashes.size())) {
      assert(state.block_hashes[index] == key.hash && "the sequence's tokens changed");
    } else {
      state.block_hashes.push_back(key.hash);
    }
    const int32_t block = state.block_table[index];
    // A fork shares full blocks; the sibling that got here first already registered it.
    if (const std::optional<uint64_t> hash = device_pool_.block_hash(block)) {
      assert(*hash == key.hash && "shared block registered with other contents");
      continue;
    }
    device_pool_.cache_block(block, key);
  }
  state.num_cached_blocks = std::max(state.num_cached_blocks, num_full_blocks);
}

// ---- allocation -----------------------------------------------------------------------------

std::optional<KvCacheManager::AllocationPlan> KvCacheManager::plan_allocation(SequenceId sequence,
                                                                              int32_t num_new_tokens,
                                                                              const PrefixMatch& prefix) const {
  assert(num_new_tokens >= 0);
  AllocationPlan plan;
  const auto it = sequences_.find(sequence);
  if (it == sequences_.end()) {
    // The match is only a view of the cache at lookup time; confirm it still holds.
    for (size_t index = 0; index < prefix.block_ids.size(); ++index) {
      const int32_t block = prefix.block_ids[index];
      if (device_pool_.block_hash(block) != prefix.block_hashes[index]) return std::nullopt;
      if (device_pool_.is_free(block)) ++plan.num_prefix_blocks_free;
    }
    const int32_t total_tokens = prefix.num_computed_tokens + num_new_tokens;
    plan.num_blocks_to_allocate = blocks_for_tokens(total_tokens) - static_cast<int32_t>(prefix.block_ids.size());
    return plan;
  }
  const SequenceBlocks& state = it->second;
  assert(prefix.block_ids.empty() && "a prefix match only applies to a new sequence");
  if (state.swapped) return std::nullopt;
  const int32_t total_tokens = state.num_tokens + num_new_tokens;
  plan.num_blocks_to_allocate =
      std::max(0, blocks_for_tokens(total_tokens) - static_cast<int32_t>(state.block_table.size()));
  // Writes start at position num_tokens; if that is inside a block another table also holds,
  // the block must be copied first. Only the last block can be partial, so only it is checked.
  if (num_new_tokens > 0 && state.num_tokens % block_size_ != 0) {
    const int32_t block = state.block_table[state.num_tokens / block_size_];
    plan.copy_on_write = device_pool_.ref_count(block) > 1;
  }
  plan.num_blocks_to_allocate += plan.copy_on_write ? 1 : 0;
  return plan;
}

bool KvCacheManager::can_allocate_slots(SequenceId sequence, int32_t num_new_tokens, const PrefixMatch& prefix) const {
  const std::optional<AllocationPlan> plan = plan_allocation(sequence, num_new_tokens, prefix);
  // Prefix blocks sitting in the free queue leave it when referenced, so they can't also be
  // handed out as new blocks.
  return plan && plan->num_blocks_to_allocate <= device_pool_.num_free_blocks() - plan->num_prefix_blocks_free &&
         (!has_residual() || plan->num_blocks_to_allocate <= device_pool_.num_free_staging());
}

bool KvCacheManager::allocate_slots(SequenceId sequence, int32_t num_new_tokens, const PrefixMatch& prefix) {
  assert(!is_swapped(sequence) && "swap a sequence in before allocating for it");
  assert(prefix.block_ids.size() == prefix.block_hashes.size());
  if (!can_allocate_slots(sequence, num_new_tokens, prefix)) return false;
  const AllocationPlan plan = *plan_allocation(sequence, num_new_tokens, prefix);

  const bool is_new = !sequences_.contains(sequence);
  SequenceBlocks& state = sequences_[sequence];
  if (is_new) {
    // References first: the prefix blocks must leave the free queue before allocate() could
    // pick (and evict) them.
    for (int32_t block : prefix.block_ids) device_pool_.take_ref(block);
    state.block_table = prefix.block_ids;
    state.block_hashes = prefix.block_hashes;
    state.num_cached_blocks = static_cast<int32_t>(prefix.block_ids.size());
    state.num_tokens = prefix.num_computed_tokens;
    state.extra_key = prefix.extra_key;
    if (device_pool_.prefix_caching_enabled() && prefix.num_query_tokens > 0) {
      device_pool_.record_prefix_cache_query(prefix.num_query_tokens, prefix.num_computed_tokens,
                                             prefix.num_query_blocks, static_cast<int32_t>(prefix.block_ids.size()));
    }
  }
  std::optional<std::vector<int32_t>> blocks = device_pool_.allocate(plan.num_blocks_to_allocate);
  assert(blocks && "can_allocate_slots promised room");
  if (has_residual()) {
    // New blocks are empty, so unsealed until they fill.
    for (int32_t block : *blocks) {
      [[maybe_unused]] const bool lent = device_pool_.assign_staging(block);
      assert(lent && "can_allocate_slots promised staging");
    }
  }
  auto next_block = blocks->begin();
  if (plan.copy_on_write) {
    int32_t& shared = state.block_table[state.num_tokens / block_size_];
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
    device_pool_.uncache_block(state.block_table[state.num_tokens / block_size_]);
  }
  state.block_table.insert(state.block_table.end(), next_block, blocks->end());
  state.num_tokens += num_new_tokens;
  return true;
}

void KvCacheManager::truncate(SequenceId sequence, int32_t num_tokens) {
  SequenceBlocks& state = running(sequence);
  assert(num_tokens >= 0 && num_tokens <= state.num_tokens);
  const int32_t keep_blocks = blocks_for_tokens(num_tokens);
  if (keep_blocks < static_cast<int32_t>(state.block_table.size())) {
    const std::span<const int32_t> dropped = std::span<const int32_t>(state.block_table).subspan(keep_blocks);
    device_pool_.free_blocks(reversed(dropped));
    state.block_table.resize(keep_blocks);
  }
  state.num_tokens = num_tokens;
  assert((!has_residual() || num_tokens % block_size_ == 0 || device_pool_.staging(state.block_table.back()) >= 0) &&
         "truncating into a sealed block");
  const int32_t num_full_blocks = num_tokens / block_size_;
  state.num_cached_blocks = std::min(state.num_cached_blocks, num_full_blocks);
  if (static_cast<int32_t>(state.block_hashes.size()) > num_full_blocks) {
    state.block_hashes.resize(num_full_blocks);
  }
  // The partial block at the new end keeps its hash: its K/V are still valid and findable
  // until allocate_slots writes into it (copying it first if shared, uncaching it if not).
}

void KvCacheManager::free(SequenceId sequence) {
  const auto it = sequences_.find(sequence);
  if (it == sequences_.end()) return;
  const SequenceBlocks& state = it->second;
  if (state.swapped) {
    host_pool_.free_blocks(reversed(state.host_block_table));
  } else {
    device_pool_.free_blocks(reversed(state.block_table));
  }
  sequences_.erase(it);
}

void KvCacheManager::fork(SequenceId parent, SequenceId child) {
  assert(!sequences_.contains(child) && "fork into an existing sequence");
  const SequenceBlocks parent_state = running(parent);  // a copy: emplacing may rehash
  for (int32_t block : parent_state.block_table) device_pool_.take_ref(block);
  sequences_.emplace(child, parent_state);
}

// ---- swapping ---------------------------------------------------------------------------------

std::optional<std::vector<int32_t>> KvCacheManager::distinct_blocks(std::span<const SequenceId> sequences,
                                                                    bool swapped) const {
  std::vector<int32_t> blocks;
  std::vector<char> seen((swapped ? host_pool_ : device_pool_).num_blocks(), 0);
  for (size_t index = 0; index < sequences.size(); ++index) {
    const auto it = sequences_.find(sequences[index]);
    if (it == sequences_.end() || it->second.swapped != swapped) return std::nullopt;
    if (std::find(sequences.begin(), sequences.begin() + index, sequences[index]) != sequences.begin() + index) {
      return std::nullopt;  // listed twice
    }
    for (int32_t block : swapped ? it->second.host_block_table : it->second.block_table) {
      if (!seen[block]) blocks.push_back(block);
      seen[block] = 1;
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
  return blocks && static_cast<int32_t>(blocks->size()) <= device_pool_.num_free_blocks() &&
         count_staged(host_pool_, *blocks) <= device_pool_.num_free_staging();
}

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
    for (int32_t device_block : state.block_table) {
      const int32_t host_block = host_of.at(device_block);
      // allocate() gave each host block its first reference; further tables add theirs.
      if (host_block_referenced[host_block]) host_pool_.take_ref(host_block);
      host_block_referenced[host_block] = 1;
      state.host_block_table.push_back(host_block);
    }
    device_pool_.free_blocks(reversed(state.block_table));
    state.block_table.clear();
    // The device blocks' hashes stay in the pool (cached free) until evicted; this sequence's
    // future blocks aren't registered, so it re-registers everything after swapping in.
    state.num_cached_blocks = 0;
    state.swapped = true;
  }
  num_swapped_out_blocks_ += static_cast<int64_t>(device_blocks.size());
  return true;
}

bool KvCacheManager::swap_in(std::span<const SequenceId> sequences) {
  if (!can_swap_in(sequences)) return false;
  const std::vector<int32_t> host_blocks = *distinct_blocks(sequences, true);
  const std::vector<int32_t> device_blocks = *device_pool_.allocate(static_cast<int32_t>(host_blocks.size()));
  std::unordered_map<int32_t, int32_t> device_of;  // host block -> device block
  for (size_t index = 0; index < host_blocks.size(); ++index) {
    device_of.emplace(host_blocks[index], device_blocks[index]);
    const int32_t staging = host_pool_.staging(host_blocks[index]);
    if (staging >= 0) device_pool_.assign_staging(device_blocks[index]);
    pending_copies_.push_back({BlockCopyDirection::kHostToDevice, host_blocks[index], device_blocks[index], staging,
                               device_pool_.staging(device_blocks[index])});
  }
  std::vector<char> device_block_referenced(device_pool_.num_blocks(), 0);
  for (SequenceId sequence : sequences) {
    SequenceBlocks& state = sequences_.at(sequence);
    for (int32_t host_block : state.host_block_table) {
      const int32_t device_block = device_of.at(host_block);
      if (device_block_referenced[device_block]) device_pool_.take_ref(device_block);
      device_block_referenced[device_block] = 1;
      state.block_table.push_back(device_block);
    }
    host_pool_.free_blocks(reversed(state.host_block_table));
    state.host_block_table.clear();
    state.swapped = false;
  }
  num_swapped_in_blocks_ += static_cast<int64_t>(host_blocks.size());
  return true;
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

std::span<const int32_t> KvCacheManager::block_table(SequenceId sequence) const {
  return at(sequence).block_table;
}

std::span<const int32_t> KvCacheManager::host_block_table(SequenceId sequence) const {
  return at(sequence).host_block_table;
}

int32_t KvCacheManager::slot(SequenceId sequence, int32_t position) const {
  const SequenceBlocks& state = at(sequence);
  assert(!state.swapped && position >= 0 && position < state.num_tokens && "no slot reserved there");
  return state.block_table[position / block_size_] * block_size_ + position % block_size_;
}

void KvCacheManager::append_slot_mapping(SequenceId sequence, int32_t first_position, int32_t count,
                                         std::vector<int32_t>& slots) const {
  for (int32_t position = first_position; position < first_position + count; ++position) {
    slots.push_back(slot(sequence, position));
  }
}

int32_t KvCacheManager::staged_blocks(SequenceId sequence, std::vector<int32_t>* staging) const {
  const SequenceBlocks& state = at(sequence);
  const std::vector<int32_t>& table = state.block_table;
  int32_t first = static_cast<int32_t>(table.size());
  while (first > 0 && device_pool_.staging(table[first - 1]) >= 0) --first;
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
  metrics.usage = device_pool_.usage();
  // A shared block holds as many tokens as its fullest holder has written into it.
  std::vector<int32_t> filled(device_pool_.num_blocks(), 0);
  for (const auto& [id, state] : sequences_) {
    metrics.num_swapped_sequences += state.swapped ? 1 : 0;
    for (size_t index = 0; index < state.block_table.size(); ++index) {
      const int32_t tokens =
          std::min<int32_t>(block_size_, state.num_tokens - static_cast<int32_t>(index) * block_size_);
      filled[state.block_table[index]] = std::max(filled[state.block_table[index]], tokens);
    }
  }
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

// ---- invariants -------------------------------------------------------------------------------

Status KvCacheManager::check_tables(const BlockPool& pool, bool host) const {
  const std::string where = host ? "host table of " : "table of ";
  std::vector<int32_t> holders(pool.num_blocks(), 0);
  for (const auto& [id, state] : sequences_) {
    const std::vector<int32_t>& table = host ? state.host_block_table : state.block_table;
    std::vector<int32_t> sorted = table;
    std::ranges::sort(sorted);
    if (std::ranges::adjacent_find(sorted) != sorted.end()) {
      return Status::error(where + sequence_name(id) + " holds a block twice");
    }
    for (int32_t block : table) {
      if (block <= BlockPool::kNullBlock || block >= pool.num_blocks()) {
        return Status::error(where + sequence_name(id) + " holds block " + std::to_string(block));
      }
      ++holders[block];
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
  const std::vector<int32_t>& table = state.swapped ? state.host_block_table : state.block_table;
  bool staged = false;
  for (size_t index = 0; index < table.size(); ++index) {
    const bool this_staged = pool.staging(table[index]) >= 0;
    if (staged && !this_staged) return Status::error(sequence_name(id) + ": a sealed block after an unsealed one");
    staged = this_staged;
  }
  if (state.num_tokens % block_size_ != 0 && !staged) {
    return Status::error(sequence_name(id) + ": its partial last block is sealed");
  }
  return Status::ok();
}

Status KvCacheManager::check_invariants() const {
  for (const BlockPool* pool : {&device_pool_, &host_pool_}) {
    if (Status status = pool->check_invariants(); !status) return status;
  }
  if (Status status = check_tables(device_pool_, false); !status) return status;
  if (Status status = check_tables(host_pool_, true); !status) return status;
  for (const auto& [id, state] : sequences_) {
    const std::vector<int32_t>& table = state.swapped ? state.host_block_table : state.block_table;
    const std::vector<int32_t>& other = state.swapped ? state.block_table : state.host_block_table;
    if (static_cast<int32_t>(table.size()) != blocks_for_tokens(state.num_tokens) || !other.empty()) {
      return Status::error(sequence_name(id) + ": table size doesn't match " + std::to_string(state.num_tokens) +
                           " tokens");
    }
    if (state.num_cached_blocks > state.num_tokens / block_size_ ||
        state.num_cached_blocks > static_cast<int32_t>(state.block_hashes.size())) {
      return Status::error(sequence_name(id) + ": more blocks cached than full");
    }
    if (Status status = check_staging(id, state); !status) return status;
    if (state.swapped) continue;
    for (int32_t index = 0; index < state.num_cached_blocks; ++index) {
      if (device_pool_.block_hash(state.block_table[index]) != state.block_hashes[index]) {
        return Status::error(sequence_name(id) + ": block " + std::to_string(index) + " lost its hash");
      }
    }
  }
  return Status::ok();
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
