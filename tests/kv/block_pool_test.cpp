// Tests for src/kv/block_pool: all-or-nothing allocation, the reserved null block, the LRU free
// queue (order, O(1) removal from the middle), ref counts, and exact prefix-cache lookups.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "kv/block_pool.h"

namespace folio {
namespace {

void expect_ok(const BlockPool& pool) {
  const Status status = pool.check_invariants();
  EXPECT_TRUE(status.is_ok()) << status.message();
}

BlockKey key_for(const std::vector<int32_t>& tokens, uint64_t parent = kRootBlockHash) {
  return make_block_key(parent, tokens, kNoExtraKey);
}

TEST(BlockPool, FreshPoolHandsOutEveryBlockButTheNullBlock) {
  BlockPool pool(8, 4, true);
  EXPECT_EQ(pool.num_free_blocks(), 7);
  EXPECT_EQ(pool.num_usable_blocks(), 7);
  EXPECT_DOUBLE_EQ(pool.usage(), 0.0);
  auto blocks = pool.allocate(7);
  ASSERT_TRUE(blocks);
  std::vector<int32_t> sorted = *blocks;
  std::ranges::sort(sorted);
  std::vector<int32_t> expected(7);
  std::iota(expected.begin(), expected.end(), 1);
  EXPECT_EQ(sorted, expected);
  for (int32_t id : *blocks) EXPECT_EQ(pool.ref_count(id), 1);
  EXPECT_EQ(pool.num_free_blocks(), 0);
  EXPECT_DOUBLE_EQ(pool.usage(), 1.0);
  EXPECT_FALSE(pool.allocate(1));
  expect_ok(pool);
}

TEST(BlockPool, AllocationIsAllOrNothing) {
  BlockPool pool(6, 4, true);
  auto held = pool.allocate(2);
  ASSERT_TRUE(held);
  const std::vector<int32_t> queue_before = pool.free_queue();
  EXPECT_FALSE(pool.allocate(4));
  EXPECT_EQ(pool.free_queue(), queue_before);
  EXPECT_EQ(pool.num_free_blocks(), 3);
  auto zero = pool.allocate(0);
  ASSERT_TRUE(zero);
  EXPECT_TRUE(zero->empty());
  expect_ok(pool);
}

TEST(BlockPool, RefCountsReturnBlocksOnlyAtZero) {
  BlockPool pool(4, 4, false);
  const int32_t block = pool.allocate(1)->front();
  pool.take_ref(block);
  pool.take_ref(block);
  EXPECT_EQ(pool.ref_count(block), 3);
  pool.free_blocks(std::vector<int32_t>{block, block});
  EXPECT_EQ(pool.ref_count(block), 1);
  EXPECT_FALSE(pool.is_free(block));
  pool.free_blocks(std::vector<int32_t>{block});
  EXPECT_TRUE(pool.is_free(block));
  EXPECT_EQ(pool.num_free_blocks(), 3);
  expect_ok(pool);
}

TEST(BlockPool, CachedBlocksGoToTheTailInFreeOrderUncachedToTheHead) {
  BlockPool pool(6, 2, true);
  const std::vector<int32_t> blocks = *pool.allocate(5);
  // Blocks 0..2 of a "sequence" are full and cached; 3 and 4 hold nothing reusable.
  uint64_t parent = kRootBlockHash;
  for (int32_t index = 0; index < 3; ++index) {
    const std::vector<int32_t> tokens = {index, index};
    const BlockKey key = key_for(tokens, parent);
    pool.cache_block(blocks[index], key);
    parent = key.hash;
  }
  // Freed last block first, as KvCacheManager does.
  std::vector<int32_t> reversed(blocks.rbegin(), blocks.rend());
  pool.free_blocks(reversed);
  const std::vector<int32_t> queue = pool.free_queue();
  ASSERT_EQ(queue.size(), 5u);
  // Uncached first (reused before anything findable), then the prefix tail before its head.
  EXPECT_EQ(std::vector<int32_t>(queue.begin() + 2, queue.end()),
            (std::vector<int32_t>{blocks[2], blocks[1], blocks[0]}));
  EXPECT_TRUE((queue[0] == blocks[3] && queue[1] == blocks[4]) || (queue[0] == blocks[4] && queue[1] == blocks[3]));
  expect_ok(pool);
}

TEST(BlockPool, TakingACachedFreeBlockRemovesItFromTheMiddle) {
  BlockPool pool(6, 2, true);
  const std::vector<int32_t> blocks = *pool.allocate(5);
  const std::vector<int32_t> tokens = {3, 4};
  pool.cache_block(blocks[2], key_for(tokens));
  pool.free_blocks(blocks);
  ASSERT_EQ(pool.find_cached_block(key_for(tokens)), blocks[2]);
  pool.take_ref(blocks[2]);  // a prefix-cache hit
  EXPECT_EQ(pool.ref_count(blocks[2]), 1);
  EXPECT_FALSE(pool.is_free(blocks[2]));
  EXPECT_EQ(pool.num_free_blocks(), 4);
  const std::vector<int32_t> queue = pool.free_queue();
  EXPECT_EQ(std::ranges::count(queue, blocks[2]), 0);
  EXPECT_EQ(pool.block_hash(blocks[2]), key_for(tokens).hash);  // still findable while used
  expect_ok(pool);
}

TEST(BlockPool, ReusingACachedFreeBlockEvictsItsHash) {
  BlockPool pool(2, 2, true);  // one usable block
  const int32_t block = pool.allocate(1)->front();
  const std::vector<int32_t> tokens = {1, 2};
  pool.cache_block(block, key_for(tokens));
  pool.free_blocks(std::vector<int32_t>{block});
  EXPECT_EQ(pool.num_cached_blocks(), 1);
  EXPECT_EQ(pool.find_cached_block(key_for(tokens)), block);
  ASSERT_EQ(pool.allocate(1)->front(), block);
  EXPECT_FALSE(pool.find_cached_block(key_for(tokens)));
  EXPECT_FALSE(pool.block_hash(block));
  EXPECT_EQ(pool.num_cached_blocks(), 0);
  expect_ok(pool);
}

TEST(BlockPool, LookupComparesContentsNotJustTheHash) {
  BlockPool pool(4, 2, true);
  const std::vector<int32_t> blocks = *pool.allocate(2);
  const std::vector<int32_t> tokens = {1, 2};
  const BlockKey real = key_for(tokens);
  pool.cache_block(blocks[0], real);
  // A forged collision: same 64-bit hash, other tokens, parent or extra key.
  const std::vector<int32_t> other_tokens = {2, 1};
  BlockKey forged{real.hash, real.parent_hash, real.extra_key, other_tokens};
  EXPECT_FALSE(pool.find_cached_block(forged));
  forged = BlockKey{real.hash, real.parent_hash + 1, real.extra_key, tokens};
  EXPECT_FALSE(pool.find_cached_block(forged));
  forged = BlockKey{real.hash, real.parent_hash, 9, tokens};
  EXPECT_FALSE(pool.find_cached_block(forged));
  // Both colliding blocks can be cached and each is found by its own contents.
  const BlockKey colliding{real.hash, real.parent_hash, real.extra_key, other_tokens};
  pool.cache_block(blocks[1], colliding);
  EXPECT_EQ(pool.find_cached_block(real), blocks[0]);
  EXPECT_EQ(pool.find_cached_block(colliding), blocks[1]);
  pool.uncache_block(blocks[0]);
  EXPECT_FALSE(pool.find_cached_block(real));
  EXPECT_EQ(pool.find_cached_block(colliding), blocks[1]);
  expect_ok(pool);
}

TEST(BlockPool, DisabledPrefixCachingFindsNothing) {
  BlockPool pool(4, 2, false);
  const std::vector<int32_t> tokens = {1, 2};
  EXPECT_FALSE(pool.find_cached_block(key_for(tokens)));
  EXPECT_FALSE(pool.prefix_caching_enabled());
}

TEST(BlockPool, CountsPrefixCacheQueries) {
  BlockPool pool(4, 2, true);
  pool.record_prefix_cache_query(10, 4, 4, 2);
  pool.record_prefix_cache_query(6, 0, 2, 0);
  const PrefixCacheStats& stats = pool.prefix_cache_stats();
  EXPECT_EQ(stats.num_queries, 2);
  EXPECT_EQ(stats.num_query_tokens, 16);
  EXPECT_EQ(stats.num_hit_tokens, 4);
  EXPECT_EQ(stats.num_query_blocks, 6);
  EXPECT_EQ(stats.num_hit_blocks, 2);
  EXPECT_DOUBLE_EQ(stats.token_hit_rate(), 0.25);
}

TEST(BlockPool, NullOnlyPoolHasNothingToGive) {
  BlockPool pool(1, 4, true);
  EXPECT_EQ(pool.num_free_blocks(), 0);
  EXPECT_FALSE(pool.allocate(1));
  EXPECT_TRUE(pool.allocate(0));
  expect_ok(pool);
}

}  // namespace
}  // namespace folio
