// Tests for src/kv/kv_cache_manager: block tables and slots, all-or-nothing allocation, prefix
// reuse (full blocks only, never the whole prompt), copy-on-write after fork, truncation, swap
// bookkeeping, metrics.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv/kv_manager_checks.h"

namespace folio {
namespace {

using testing::expect_ok;
using testing::iota_tokens;

std::vector<int32_t> table_of(const KvCacheManager& manager, SequenceId sequence) {
  const std::span<const int32_t> table = manager.block_table(sequence);
  return std::vector<int32_t>(table.begin(), table.end());
}

// Admits a sequence, "computes" all its tokens and registers its full blocks.
void run_prompt(KvCacheManager& manager, SequenceId sequence, const std::vector<int32_t>& tokens,
                uint64_t extra_key = kNoExtraKey) {
  const PrefixMatch match = manager.find_cached_prefix(tokens, extra_key);
  ASSERT_TRUE(manager.allocate_slots(sequence, static_cast<int32_t>(tokens.size()) - match.num_computed_tokens, match));
  manager.cache_full_blocks(sequence, tokens);
}

TEST(KvCacheManager, AllocatesTablesAndSlots) {
  KvCacheManager manager({.num_blocks = 10, .block_size = 4});
  ASSERT_TRUE(manager.allocate_slots(1, 6));
  EXPECT_EQ(manager.num_tokens(1), 6);
  const std::vector<int32_t> table = table_of(manager, 1);
  ASSERT_EQ(table.size(), 2u);
  for (int32_t position = 0; position < 6; ++position) {
    EXPECT_EQ(manager.slot(1, position), table[position / 4] * 4 + position % 4);
  }
  std::vector<int32_t> slots;
  manager.append_slot_mapping(1, 2, 3, slots);
  EXPECT_EQ(slots, (std::vector<int32_t>{table[0] * 4 + 2, table[0] * 4 + 3, table[1] * 4}));
  ASSERT_TRUE(manager.allocate_slots(1, 2));  // fills block 1, no new block
  EXPECT_EQ(manager.block_table(1).size(), 2u);
  ASSERT_TRUE(manager.allocate_slots(1, 1));
  EXPECT_EQ(manager.block_table(1).size(), 3u);
  EXPECT_EQ(manager.num_free_blocks(), 6);
  expect_ok(manager);
}

TEST(KvCacheManager, ExhaustionSaysNoAndChangesNothing) {
  KvCacheManager manager({.num_blocks = 5, .block_size = 4});  // 4 usable blocks
  ASSERT_TRUE(manager.allocate_slots(1, 10));                  // 3 blocks
  const std::vector<int32_t> queue = manager.device_pool().free_queue();
  EXPECT_FALSE(manager.can_allocate_slots(1, 7));
  EXPECT_FALSE(manager.allocate_slots(1, 7));  // would need 2 more
  EXPECT_EQ(manager.num_tokens(1), 10);
  EXPECT_EQ(manager.block_table(1).size(), 3u);
  EXPECT_FALSE(manager.allocate_slots(2, 5));
  EXPECT_FALSE(manager.contains(2));
  EXPECT_EQ(manager.device_pool().free_queue(), queue);
  EXPECT_TRUE(manager.allocate_slots(1, 6));  // exactly one more block
  EXPECT_EQ(manager.num_free_blocks(), 0);
  expect_ok(manager);
}

TEST(KvCacheManager, ReusesCachedFullBlocksButNeverTheWholePrompt) {
  KvCacheManager manager({.num_blocks = 16, .block_size = 4});
  const std::vector<int32_t> prompt = iota_tokens(10);
  run_prompt(manager, 1, prompt);
  const std::vector<int32_t> first_table = table_of(manager, 1);
  manager.free(1);
  expect_ok(manager);

  const PrefixMatch match = manager.find_cached_prefix(prompt);
  EXPECT_EQ(match.num_computed_tokens, 8);
  EXPECT_EQ(match.block_ids, (std::vector<int32_t>{first_table[0], first_table[1]}));
  EXPECT_EQ(match.num_query_blocks, 2);
  ASSERT_TRUE(manager.allocate_slots(2, 2, match));
  EXPECT_EQ(manager.num_tokens(2), 10);
  EXPECT_EQ(table_of(manager, 2)[0], first_table[0]);
  expect_ok(manager);

  // A prompt of exactly two blocks may reuse only one: its last token must be computed.
  const std::vector<int32_t> exact(prompt.begin(), prompt.begin() + 8);
  EXPECT_EQ(manager.find_cached_prefix(exact).num_computed_tokens, 4);
  // A one-token prompt and an empty one reuse nothing.
  EXPECT_EQ(manager.find_cached_prefix(std::vector<int32_t>{100}).num_computed_tokens, 0);
  EXPECT_EQ(manager.find_cached_prefix(std::vector<int32_t>{}).num_computed_tokens, 0);

  const PrefixCacheStats& stats = manager.metrics().prefix_cache;
  EXPECT_EQ(stats.num_queries, 2);
  EXPECT_EQ(stats.num_query_tokens, 20);
  EXPECT_EQ(stats.num_hit_tokens, 8);
  EXPECT_EQ(stats.num_query_blocks, 4);
  EXPECT_EQ(stats.num_hit_blocks, 2);
}

TEST(KvCacheManager, PrefixStopsAtTheFirstDifferentBlockAndRespectsExtraKeys) {
  KvCacheManager manager({.num_blocks = 16, .block_size = 4});
  const std::vector<int32_t> prompt = iota_tokens(13);
  run_prompt(manager, 1, prompt);
  std::vector<int32_t> changed = prompt;
  changed[5] = 7;  // second block differs: the third can't be reused even though equal
  EXPECT_EQ(manager.find_cached_prefix(changed).num_computed_tokens, 4);
  EXPECT_EQ(manager.find_cached_prefix(prompt, /*extra_key=*/42).num_computed_tokens, 0);
  // Hits on blocks still in use share them.
  const PrefixMatch match = manager.find_cached_prefix(prompt);
  ASSERT_EQ(match.num_computed_tokens, 12);
  ASSERT_TRUE(manager.allocate_slots(2, 1, match));
  EXPECT_EQ(manager.device_pool().ref_count(match.block_ids[0]), 2);
  expect_ok(manager);
}

TEST(KvCacheManager, HitOnFreeBlocksCountsThemAgainstRoom) {
  // 4 usable blocks. Sequence 1 caches 2 full blocks and is freed: all 4 are free, 2 cached.
  KvCacheManager manager({.num_blocks = 5, .block_size = 2});
  const std::vector<int32_t> prompt = iota_tokens(5);
  run_prompt(manager, 1, prompt);
  manager.free(1);
  const PrefixMatch match = manager.find_cached_prefix(prompt);
  ASSERT_EQ(match.num_computed_tokens, 4);
  // Reusing 2 blocks leaves 2 free: 5 more tokens (3 blocks) don't fit, 4 do.
  EXPECT_FALSE(manager.can_allocate_slots(2, 5, match));
  EXPECT_FALSE(manager.allocate_slots(2, 5, match));
  EXPECT_EQ(manager.find_cached_prefix(prompt).num_computed_tokens, 4);  // nothing evicted
  EXPECT_TRUE(manager.allocate_slots(2, 4, match));
  EXPECT_EQ(manager.num_free_blocks(), 0);
  expect_ok(manager);
}

TEST(KvCacheManager, StaleMatchIsRefused) {
  KvCacheManager manager({.num_blocks = 3, .block_size = 2});  // 2 usable blocks
  const std::vector<int32_t> prompt = iota_tokens(3);
  run_prompt(manager, 1, prompt);
  manager.free(1);
  const PrefixMatch match = manager.find_cached_prefix(prompt);
  ASSERT_EQ(match.num_computed_tokens, 2);
  ASSERT_TRUE(manager.allocate_slots(2, 4));  // evicts the cached block
  manager.free(2);
  EXPECT_FALSE(manager.allocate_slots(3, 1, match));
  EXPECT_FALSE(manager.contains(3));
  expect_ok(manager);
}

TEST(KvCacheManager, ForkSharesBlocksAndCopiesTheSharedPartialBlockOnWrite) {
  KvCacheManager manager({.num_blocks = 10, .block_size = 4});
  ASSERT_TRUE(manager.allocate_slots(1, 6));
  manager.fork(1, 2);
  const std::vector<int32_t> shared = table_of(manager, 1);
  EXPECT_EQ(table_of(manager, 2), shared);
  EXPECT_EQ(manager.device_pool().ref_count(shared[0]), 2);
  EXPECT_EQ(manager.device_pool().ref_count(shared[1]), 2);
  expect_ok(manager);

  ASSERT_TRUE(manager.allocate_slots(2, 1));  // writes position 6, inside shared block 1
  const std::vector<int32_t> child = table_of(manager, 2);
  EXPECT_EQ(child[0], shared[0]);
  EXPECT_NE(child[1], shared[1]);
  EXPECT_EQ(manager.device_pool().ref_count(shared[1]), 1);
  const std::vector<BlockCopy> copies = manager.take_pending_copies();
  EXPECT_EQ(copies, (std::vector<BlockCopy>{{BlockCopyDirection::kDeviceToDevice, shared[1], child[1]}}));
  EXPECT_TRUE(manager.take_pending_copies().empty());
  EXPECT_EQ(manager.metrics().num_copy_on_write_blocks, 1);

  ASSERT_TRUE(manager.allocate_slots(1, 1));  // the parent now holds block 1 alone
  EXPECT_EQ(table_of(manager, 1), shared);
  EXPECT_TRUE(manager.take_pending_copies().empty());
  expect_ok(manager);
}

TEST(KvCacheManager, ForkAtABlockBoundaryNeedsNoCopy) {
  KvCacheManager manager({.num_blocks = 10, .block_size = 4});
  ASSERT_TRUE(manager.allocate_slots(1, 8));
  manager.fork(1, 2);
  ASSERT_TRUE(manager.allocate_slots(2, 1));
  EXPECT_TRUE(manager.take_pending_copies().empty());
  EXPECT_EQ(manager.block_table(2).size(), 3u);
  EXPECT_EQ(manager.block_table(2)[1], manager.block_table(1)[1]);
  expect_ok(manager);
}

TEST(KvCacheManager, CopyOnWriteCountsInAllOrNothing) {
  KvCacheManager manager({.num_blocks = 4, .block_size = 4});  // 3 usable blocks
  ASSERT_TRUE(manager.allocate_slots(1, 6));
  manager.fork(1, 2);
  // One free block: a write that also needs a new block (copy + 1) must fail untouched.
  EXPECT_FALSE(manager.allocate_slots(2, 3));
  EXPECT_TRUE(manager.pending_copies().empty());
  EXPECT_EQ(manager.block_table(2)[1], manager.block_table(1)[1]);
  EXPECT_TRUE(manager.allocate_slots(2, 2));  // copy only
  expect_ok(manager);
}

TEST(KvCacheManager, FreeReleasesLastBlockFirst) {
  KvCacheManager manager({.num_blocks = 8, .block_size = 2});
  const std::vector<int32_t> prompt = iota_tokens(7);
  run_prompt(manager, 1, prompt);
  const std::vector<int32_t> table = table_of(manager, 1);
  manager.free(1);
  manager.free(1);  // unknown ids are ignored
  EXPECT_FALSE(manager.contains(1));
  const std::vector<int32_t> queue = manager.device_pool().free_queue();
  // The partial block (uncached) is reused first, then the prefix from its tail.
  EXPECT_EQ(queue.front(), table[3]);
  EXPECT_EQ(std::vector<int32_t>(queue.end() - 3, queue.end()), (std::vector<int32_t>{table[2], table[1], table[0]}));
  EXPECT_EQ(manager.num_free_blocks(), 7);
  expect_ok(manager);
}

TEST(KvCacheManager, TruncateFreesEmptiedBlocksAndUncachesOnRewrite) {
  KvCacheManager manager({.num_blocks = 10, .block_size = 4});
  const std::vector<int32_t> tokens = iota_tokens(12);
  run_prompt(manager, 1, tokens);
  const std::vector<int32_t> table = table_of(manager, 1);
  manager.truncate(1, 6);
  EXPECT_EQ(manager.num_tokens(1), 6);
  EXPECT_EQ(manager.block_table(1).size(), 2u);
  EXPECT_TRUE(manager.device_pool().is_free(table[2]));
  // Block 1 still holds tokens 4..7's K/V: findable until written.
  EXPECT_EQ(manager.find_cached_prefix(tokens).num_computed_tokens, 8);
  expect_ok(manager);
  ASSERT_TRUE(manager.allocate_slots(1, 1));
  EXPECT_FALSE(manager.device_pool().block_hash(table[1]));
  EXPECT_EQ(manager.find_cached_prefix(tokens).num_computed_tokens, 4);
  expect_ok(manager);
  // Refilled with other tokens, the block is cached under its new identity.
  std::vector<int32_t> rewritten(tokens.begin(), tokens.begin() + 7);
  rewritten.push_back(1);
  ASSERT_TRUE(manager.allocate_slots(1, 1));
  manager.cache_full_blocks(1, rewritten);
  rewritten.push_back(2);
  EXPECT_EQ(manager.find_cached_prefix(rewritten).num_computed_tokens, 8);
  expect_ok(manager);
}

TEST(KvCacheManager, TruncatedSharedBlockIsCopiedNotOverwritten) {
  KvCacheManager manager({.num_blocks = 10, .block_size = 4});
  const std::vector<int32_t> tokens = iota_tokens(9);
  run_prompt(manager, 1, tokens);
  manager.fork(1, 2);
  manager.truncate(2, 6);  // inside block 1, which sequence 1 still holds, full and cached
  manager.free(1);         // now only sequence 2 holds it, and it is still cached
  expect_ok(manager);
  ASSERT_TRUE(manager.allocate_slots(2, 1));
  EXPECT_TRUE(manager.take_pending_copies().empty());
  // Writing uncached it: the old identity (tokens 4..7) is no longer claimed by rewritten K/V.
  EXPECT_EQ(manager.find_cached_prefix(tokens).num_computed_tokens, 4);
  expect_ok(manager);
}

TEST(KvCacheManager, SwapOutAndInMovesBlocksAndKeepsForkSharing) {
  KvCacheManager manager({.num_blocks = 10, .block_size = 4, .num_host_blocks = 6});
  ASSERT_TRUE(manager.allocate_slots(1, 10));  // 3 blocks
  manager.fork(1, 2);
  ASSERT_TRUE(manager.allocate_slots(2, 3));  // copies block 2, adds block 3
  manager.take_pending_copies();
  const std::vector<SequenceId> family = {1, 2};
  ASSERT_TRUE(manager.can_swap_out(family));
  ASSERT_TRUE(manager.swap_out(family));
  EXPECT_TRUE(manager.is_swapped(1));
  EXPECT_TRUE(manager.block_table(1).empty());
  EXPECT_EQ(manager.num_free_blocks(), 9);
  // 2 shared + 1 parent-only + 2 child-only blocks = 5 host blocks.
  EXPECT_EQ(manager.host_pool().num_used_blocks(), 5);
  const std::vector<BlockCopy> out = manager.take_pending_copies();
  ASSERT_EQ(out.size(), 5u);
  for (const BlockCopy& copy : out) EXPECT_EQ(copy.direction, BlockCopyDirection::kDeviceToHost);
  EXPECT_EQ(manager.host_block_table(1)[0], manager.host_block_table(2)[0]);
  EXPECT_EQ(manager.host_pool().ref_count(manager.host_block_table(1)[0]), 2);
  expect_ok(manager);
  EXPECT_FALSE(manager.can_allocate_slots(1, 1));

  ASSERT_TRUE(manager.swap_in(family));
  const std::vector<BlockCopy> in = manager.take_pending_copies();
  ASSERT_EQ(in.size(), 5u);
  for (const BlockCopy& copy : in) EXPECT_EQ(copy.direction, BlockCopyDirection::kHostToDevice);
  EXPECT_EQ(manager.host_pool().num_used_blocks(), 0);
  EXPECT_EQ(manager.block_table(1)[0], manager.block_table(2)[0]);
  EXPECT_EQ(manager.block_table(1)[1], manager.block_table(2)[1]);
  EXPECT_NE(manager.block_table(1)[2], manager.block_table(2)[2]);
  EXPECT_EQ(manager.num_tokens(2), 13);
  EXPECT_EQ(manager.metrics().num_swapped_out_blocks, 5);
  EXPECT_EQ(manager.metrics().num_swapped_in_blocks, 5);
  expect_ok(manager);
}

TEST(KvCacheManager, SwapIsAllOrNothing) {
  KvCacheManager manager({.num_blocks = 10, .block_size = 4, .num_host_blocks = 3});  // 2 usable
  ASSERT_TRUE(manager.allocate_slots(1, 12));
  const std::vector<SequenceId> one = {1};
  EXPECT_FALSE(manager.can_swap_out(one));
  EXPECT_FALSE(manager.swap_out(one));
  EXPECT_FALSE(manager.is_swapped(1));
  EXPECT_TRUE(manager.pending_copies().empty());
  const std::vector<SequenceId> twice = {1, 1};
  EXPECT_FALSE(manager.can_swap_out(twice));
  const std::vector<SequenceId> unknown = {5};
  EXPECT_FALSE(manager.can_swap_out(unknown));
  manager.truncate(1, 8);
  ASSERT_TRUE(manager.swap_out(one));
  ASSERT_TRUE(manager.allocate_slots(2, 36));  // all 9 device blocks
  EXPECT_FALSE(manager.can_swap_in(one));
  EXPECT_FALSE(manager.swap_in(one));
  manager.free(2);
  EXPECT_TRUE(manager.swap_in(one));
  manager.free(1);
  EXPECT_EQ(manager.num_free_blocks(), 9);
  EXPECT_EQ(manager.host_pool().num_free_blocks(), 2);
  expect_ok(manager);
}

TEST(KvCacheManager, SwappedInBlocksAreCachedAgain) {
  KvCacheManager manager({.num_blocks = 10, .block_size = 4, .num_host_blocks = 5});
  const std::vector<int32_t> tokens = iota_tokens(9);
  run_prompt(manager, 1, tokens);
  const std::vector<SequenceId> one = {1};
  ASSERT_TRUE(manager.swap_out(one));
  ASSERT_TRUE(manager.allocate_slots(2, 36));  // evicts every cached device block
  EXPECT_EQ(manager.find_cached_prefix(tokens).num_computed_tokens, 0);
  manager.free(2);
  ASSERT_TRUE(manager.swap_in(one));
  manager.cache_full_blocks(1, tokens);
  const PrefixMatch match = manager.find_cached_prefix(tokens);
  EXPECT_EQ(match.num_computed_tokens, 8);
  EXPECT_EQ(match.block_ids[0], manager.block_table(1)[0]);
  expect_ok(manager);
}

TEST(KvCacheManager, MetricsReportUtilization) {
  KvCacheManager manager({.num_blocks = 11, .block_size = 4});
  ASSERT_TRUE(manager.allocate_slots(1, 6));  // 2 blocks, 6 tokens
  manager.fork(1, 2);                         // shared: still 6 tokens in 2 blocks
  ASSERT_TRUE(manager.allocate_slots(3, 4));  // 1 full block
  const KvCacheMetrics metrics = manager.metrics();
  EXPECT_EQ(metrics.num_blocks, 10);
  EXPECT_EQ(metrics.num_used_blocks, 3);
  EXPECT_EQ(metrics.num_free_blocks, 7);
  EXPECT_DOUBLE_EQ(metrics.usage, 0.3);
  EXPECT_EQ(metrics.num_tokens_held, 10);
  EXPECT_EQ(metrics.num_token_slots, 12);
  EXPECT_DOUBLE_EQ(metrics.kv_utilization, 10.0 / 12.0);
  EXPECT_EQ(metrics.num_sequences, 3);
}

TEST(KvCacheManager, PrefixCachingOffMeansNoHashes) {
  KvCacheManager manager({.num_blocks = 10, .block_size = 4, .enable_prefix_caching = false});
  const std::vector<int32_t> tokens = iota_tokens(9);
  run_prompt(manager, 1, tokens);
  manager.free(1);
  EXPECT_EQ(manager.find_cached_prefix(tokens).num_computed_tokens, 0);
  EXPECT_EQ(manager.device_pool().num_cached_blocks(), 0);
  EXPECT_EQ(manager.metrics().prefix_cache.num_queries, 0);
  expect_ok(manager);
}

}  // namespace
}  // namespace folio
