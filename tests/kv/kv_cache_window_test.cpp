// Tests for sliding-window block tables (kv/kv_groups.h, KvCacheManager with several groups):
// how layers are grouped, which blocks a window group releases and when, and prefix hits that
// need only the blocks inside the window.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv/kv_groups.h"
#include "kv/kv_manager_checks.h"

namespace folio {
namespace {

using testing::expect_ok;
using testing::iota_tokens;

// Gemma 3's layout: every sixth layer global.
std::vector<int32_t> gemma_windows(int32_t num_layers, int32_t window) {
  std::vector<int32_t> windows;
  for (int32_t l = 0; l < num_layers; ++l) windows.push_back(l % 6 == 5 ? 0 : window);
  return windows;
}

void expect_slots_distinct(const KvGroups& groups) {
  std::set<std::pair<int32_t, int32_t>> seen;
  for (int32_t l = 0; l < groups.num_layers(); ++l) {
    const int32_t slot = groups.layer_slot[static_cast<size_t>(l)];
    EXPECT_GE(slot, 0);
    EXPECT_LT(slot, groups.num_slots);
    EXPECT_TRUE(seen.emplace(groups.layer_group[static_cast<size_t>(l)], slot).second) << "layer " << l;
  }
}

TEST(KvGroups, Gemma3_270mIsOneFullGroupAndFiveWindowGroups) {
  const std::vector<int32_t> windows = gemma_windows(18, 512);
  const KvGroups groups = kv_groups_for(windows);
  EXPECT_EQ(groups.num_slots, 3);
  EXPECT_EQ(groups.windows, (std::vector<int32_t>{0, 512, 512, 512, 512, 512}));
  for (int32_t l = 0; l < 18; ++l) {
    EXPECT_EQ(groups.windows[static_cast<size_t>(groups.layer_group[static_cast<size_t>(l)])], windows[l]);
  }
  expect_slots_distinct(groups);
}

TEST(KvGroups, UnevenBucketsPadTheLastGroup) {
  // Gemma 3 1B: 26 layers, 4 global: groups of 4, the last window group holding 2 layers.
  const KvGroups groups = kv_groups_for(gemma_windows(26, 512));
  EXPECT_EQ(groups.num_slots, 4);
  EXPECT_EQ(groups.num_groups(), 1 + 6);
  expect_slots_distinct(groups);
}

TEST(KvGroups, NoWindowOrNoReleaseIsOneGroupOfEveryLayer) {
  for (const KvGroups& groups :
       {kv_groups_for(std::vector<int32_t>(5, 0)), kv_groups_for(gemma_windows(12, 64), false)}) {
    EXPECT_EQ(groups.windows, (std::vector<int32_t>{0}));
    EXPECT_EQ(groups.num_slots, groups.num_layers());
    for (int32_t l = 0; l < groups.num_layers(); ++l) {
      EXPECT_EQ(groups.layer_group[static_cast<size_t>(l)], 0);
      EXPECT_EQ(groups.layer_slot[static_cast<size_t>(l)], l);
    }
  }
}

TEST(KvGroups, FirstBlockInWindowIsTheBlockOfTheOldestKeyInView) {
  // Brute force: the query at p sees keys max(0, p - W + 1) .. p.
  for (int32_t block_size : {1, 3, 4, 16}) {
    for (int32_t window : {1, 2, 5, 16, 17, 40}) {
      for (int32_t position = 0; position < 100; ++position) {
        int32_t first = position / block_size;
        for (int32_t key = position; key >= 0 && key > position - window; --key) first = key / block_size;
        EXPECT_EQ(first_block_in_window(position, window, block_size), first)
            << "p " << position << " W " << window << " B " << block_size;
      }
    }
  }
  EXPECT_EQ(first_block_in_window(1000, 0, 4), 0);  // the whole context
}

std::vector<int32_t> table_of(const KvCacheManager& manager, SequenceId sequence, int32_t group) {
  const std::span<const int32_t> table = manager.block_table(sequence, group);
  return std::vector<int32_t>(table.begin(), table.end());
}

int32_t nulls(const std::vector<int32_t>& table) {
  return static_cast<int32_t>(std::ranges::count(table, BlockPool::kNullBlock));
}

TEST(KvCacheWindow, DecodingReleasesTheBlocksBehindTheWindow) {
  // Window 8, blocks of 4: a query at p reads blocks from (p - 7) / 4 on.
  KvCacheManager manager({.num_blocks = 40, .block_size = 4, .group_windows = {0, 8}});
  ASSERT_TRUE(manager.allocate_slots(1, 11));  // positions 0..10
  EXPECT_EQ(nulls(table_of(manager, 1, 1)), 0);
  EXPECT_EQ(manager.num_free_blocks(), 39 - 6);
  // p = 11 = W + B - 1: the first key in view is 4, block 1: block 0 goes.
  manager.release_out_of_window(1, 11);
  ASSERT_TRUE(manager.allocate_slots(1, 1));
  EXPECT_EQ(nulls(table_of(manager, 1, 1)), 1);
  EXPECT_EQ(table_of(manager, 1, 1)[0], BlockPool::kNullBlock);
  EXPECT_EQ(nulls(table_of(manager, 1, 0)), 0);  // the full group keeps everything
  EXPECT_EQ(manager.num_free_blocks(), 39 - 5);
  for (int32_t p = 12; p < 40; ++p) {
    manager.release_out_of_window(1, p);
    ASSERT_TRUE(manager.allocate_slots(1, 1));
    const std::vector<int32_t> window = table_of(manager, 1, 1);
    EXPECT_EQ(nulls(window), first_block_in_window(p, 8, 4)) << p;
    // Every key the query at p reads is still there.
    for (int32_t key = p - 7; key <= p; ++key) EXPECT_NE(window[key / 4], BlockPool::kNullBlock);
    expect_ok(manager);
  }
  // 40 tokens: 10 blocks in the full group; in the window group the two a query at 39 reads.
  EXPECT_EQ(manager.metrics().num_used_blocks, 10 + 2);
  manager.free(1);
  EXPECT_EQ(manager.num_free_blocks(), 39);
  expect_ok(manager);
}

TEST(KvCacheWindow, ReleaseMakesRoomInAFullPool) {
  // 8 usable blocks, all taken by 16 tokens (4 blocks in each group).
  KvCacheManager manager({.num_blocks = 9, .block_size = 4, .group_windows = {0, 4}});
  ASSERT_TRUE(manager.allocate_slots(1, 16));
  EXPECT_EQ(manager.num_free_blocks(), 0);
  // The next token needs a block in each group; releasing the window group's first three
  // (a query at 16 reads keys 13..16) gives them.
  EXPECT_FALSE(manager.can_allocate_slots(1, 1));
  manager.release_out_of_window(1, 16);
  manager.release_out_of_window(1, 16);  // twice: nothing more to give
  EXPECT_EQ(manager.num_free_blocks(), 3);
  ASSERT_TRUE(manager.allocate_slots(1, 1));
  EXPECT_EQ(nulls(table_of(manager, 1, 1)), 3);
  EXPECT_EQ(manager.num_free_blocks(), 1);
  expect_ok(manager);
}

TEST(KvCacheWindow, PrefixHitNeedsOnlyTheWindowsBlocks) {
  KvCacheManager manager({.num_blocks = 21, .block_size = 4, .group_windows = {0, 8}});
  const std::vector<int32_t> prompt = iota_tokens(24);
  // Sequence 1 computes its prompt one token at a time, so its window group releases as it goes.
  for (int32_t p = 0; p < 24; ++p) {
    manager.release_out_of_window(1, p);
    ASSERT_TRUE(manager.allocate_slots(1, 1));
    manager.cache_full_blocks(1, std::span<const int32_t>(prompt).first(p + 1));
  }
  EXPECT_EQ(nulls(table_of(manager, 1, 1)), first_block_in_window(23, 8, 4));
  // Sequence 2 takes every free block and gives them back unhashed: the released window blocks
  // (cached, free) are evicted. What stays findable is what sequence 1 still holds.
  const int32_t free_blocks = manager.num_free_blocks();
  ASSERT_TRUE(manager.allocate_slots(2, free_blocks / 2 * 4));
  EXPECT_EQ(manager.num_free_blocks(), 0);
  manager.free(2);
  EXPECT_EQ(manager.device_pool().num_cached_blocks(), 6 + 2);
  // The same 24 tokens and 5 more: all 6 full blocks hit, though the window group has only the
  // last two (those a query at 24 reads: keys 17.., blocks 4 and 5).
  std::vector<int32_t> longer = prompt;
  for (int32_t t = 0; t < 5; ++t) longer.push_back(900 + t);
  const PrefixMatch match = manager.find_cached_prefix(longer);
  EXPECT_EQ(match.num_computed_tokens, 24);
  ASSERT_EQ(match.more_groups.size(), 1u);
  const std::vector<int32_t> window = match.more_groups[0].block_ids;
  ASSERT_EQ(window.size(), 6u);
  for (int32_t index = 0; index < 6; ++index) {
    EXPECT_EQ(window[index] == BlockPool::kNullBlock, index < first_block_in_window(24, 8, 4)) << index;
  }
  ASSERT_TRUE(manager.allocate_slots(3, 5, match));
  EXPECT_EQ(manager.num_tokens(3), 29);
  EXPECT_EQ(manager.slot(3, 20, 1), window[5] * 4);  // sequence 1's K/V of position 20
  expect_ok(manager);
  // A shorter prompt stops where the window group lacks blocks: 14 tokens could hit 3 blocks in
  // the full group, but a query at 12 (or 8, or 4) reads window blocks that were evicted.
  EXPECT_EQ(manager.find_cached_prefix(iota_tokens(14)).num_computed_tokens, 0);
  manager.free(3);
  manager.free(1);
  expect_ok(manager);
}

TEST(KvCacheWindow, ForkSwapAndTruncateKeepReleasedEntriesReleased) {
  KvCacheManager manager({.num_blocks = 40, .block_size = 4, .num_host_blocks = 20, .group_windows = {0, 8}});
  ASSERT_TRUE(manager.allocate_slots(1, 20));
  manager.release_out_of_window(1, 20);  // blocks before (20 - 7) / 4 = 3
  ASSERT_TRUE(manager.allocate_slots(1, 2));
  EXPECT_EQ(nulls(table_of(manager, 1, 1)), 3);
  manager.fork(1, 2);
  expect_ok(manager);
  manager.release_out_of_window(2, 22);       // nothing more: the fork shares the released entries
  ASSERT_TRUE(manager.allocate_slots(2, 1));  // copy-on-write of the partial block, in both groups
  EXPECT_EQ(manager.metrics().num_copy_on_write_blocks, 2);
  expect_ok(manager);
  const SequenceId family[] = {1};
  ASSERT_TRUE(manager.swap_out(family));
  EXPECT_EQ(nulls(std::vector<int32_t>(manager.host_block_table(1, 1).begin(), manager.host_block_table(1, 1).end())),
            3);
  expect_ok(manager);
  ASSERT_TRUE(manager.swap_in(family));
  EXPECT_EQ(nulls(table_of(manager, 1, 1)), 3);
  manager.truncate(1, 21);
  EXPECT_EQ(nulls(table_of(manager, 1, 1)), 3);
  expect_ok(manager);
  manager.free(1);
  manager.free(2);
  EXPECT_EQ(manager.num_free_blocks(), 39);
  expect_ok(manager);
}

}  // namespace
}  // namespace folio
