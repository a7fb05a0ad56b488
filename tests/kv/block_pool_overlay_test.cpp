// Tests for BlockPool's overlay ids (residual formats): block ids past the plain ones that live in
// the staging blocks' bytes. Plain blocks go first; staged allocations take their staging blocks
// before their ids; can_allocate says exactly what allocate does; a freed overlay id leaves the
// prefix cache; and through a long random run no block id in use ever shares bytes with a lent
// staging block (checked on byte ranges from the pool's public state).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "kv/block_pool.h"

namespace folio {
namespace {

constexpr int64_t kStagingBytes = 262144;  // fp16, 128 tokens x 8 heads x 128 (one layer half)
constexpr int64_t kBlockBytes = 135168;    // fp8 of the same, scales included

void expect_ok(const BlockPool& pool) {
  const Status status = pool.check_invariants();
  ASSERT_TRUE(status.is_ok()) << status.message();
}

// num_plain ids (null block included), num_staging staging blocks and the overlay ids they hold.
BlockPool make_pool(int32_t num_plain, int32_t num_staging, bool prefix_caching = true) {
  const auto ids = static_cast<int32_t>(num_staging * kStagingBytes / kBlockBytes);
  return BlockPool(num_plain, 4, prefix_caching, num_staging, ids, kStagingBytes, kBlockBytes);
}

// Every block id in use against every lent staging block, on bytes of the staging region.
void expect_no_shared_bytes(const BlockPool& pool) {
  std::vector<int32_t> lent;
  for (int32_t id = 1; id < pool.num_blocks(); ++id) {
    if (pool.ref_count(id) > 0 && pool.staging(id) >= 0) lent.push_back(pool.staging(id));
  }
  for (int32_t id = pool.num_plain_blocks(); id < pool.num_blocks(); ++id) {
    if (pool.ref_count(id) == 0) continue;
    const int64_t begin = (id - pool.num_plain_blocks()) * kBlockBytes, end = begin + kBlockBytes;
    for (int32_t staging : lent) {
      const int64_t s_begin = staging * kStagingBytes, s_end = s_begin + kStagingBytes;
      ASSERT_FALSE(begin < s_end && s_begin < end) << "block " << id << " shares bytes with staging " << staging;
    }
  }
}

TEST(BlockPoolOverlay, PlainBlocksGoFirstThenTheLowestOverlayIds) {
  BlockPool pool = make_pool(5, 4);  // plain 1..4, overlay 5..11 (4 * 1.94 = 7 ids)
  EXPECT_EQ(pool.num_blocks(), 12);
  EXPECT_EQ(pool.num_free_blocks(), 4 + 7);
  const std::vector<int32_t> plain = *pool.allocate(4);
  for (int32_t id : plain) EXPECT_FALSE(pool.is_overlay(id));
  const std::vector<int32_t> overlay = *pool.allocate(2);
  EXPECT_EQ(overlay, (std::vector<int32_t>{5, 6}));
  // Id 6 straddles staging blocks 0 and 1 (bytes 135,168..270,336).
  EXPECT_EQ(pool.num_free_staging(), 2);
  EXPECT_EQ(pool.num_used_blocks(), 6);
  expect_ok(pool);
}

TEST(BlockPoolOverlay, StagedAllocationsTakeTheirStagingBeforeTheirIds) {
  BlockPool pool = make_pool(2, 3);  // plain 1, overlay 2..6 (3 * 1.94 = 5 ids)
  // A staged block takes the top staging block first, then the plain block, then ids from the
  // bottom.
  ASSERT_TRUE(pool.can_allocate(2, 1));
  const std::vector<int32_t> blocks = *pool.allocate(2, 1);
  EXPECT_EQ(blocks, (std::vector<int32_t>{1, 2})) << "the plain block, then overlay id 0";
  EXPECT_EQ(pool.staging(blocks[0]), 2);
  EXPECT_EQ(pool.staging(blocks[1]), -1);
  ASSERT_NO_FATAL_FAILURE(expect_no_shared_bytes(pool));
  // Staging 2 (bytes 524,288..786,432) blocks overlay ids 3 and 4; id 0 blocks staging 0. Left:
  // ids 1 and 2, and staging 1, which lies under both.
  EXPECT_EQ(pool.num_free_blocks(), 2);
  EXPECT_EQ(pool.num_free_staging(), 1);
  EXPECT_FALSE(pool.can_allocate(1, 1)) << "the free staging block lies under every free id";
  EXPECT_TRUE(pool.can_allocate(2, 0));
  EXPECT_FALSE(pool.can_allocate(3, 0));
  expect_ok(pool);
}

TEST(BlockPoolOverlay, AFreedOverlayIdLeavesThePrefixCache) {
  BlockPool pool = make_pool(2, 2);
  const int32_t plain = pool.allocate(1)->front();
  const int32_t overlay = pool.allocate(1)->front();
  ASSERT_TRUE(pool.is_overlay(overlay));
  const std::vector<int32_t> tokens{1, 2, 3, 4};
  const BlockKey key = make_block_key(kRootBlockHash, tokens, kNoExtraKey);
  pool.cache_block(overlay, key);
  EXPECT_EQ(pool.find_cached_block(key), overlay) << "an overlay id in use is found and shared like any block";
  pool.take_ref(overlay);
  pool.free_blocks({&overlay, 1});
  EXPECT_EQ(pool.find_cached_block(key), overlay);
  pool.free_blocks({&overlay, 1});
  EXPECT_FALSE(pool.find_cached_block(key));
  EXPECT_TRUE(pool.is_free(overlay));
  // A plain block keeps its hash when freed (cached free), as without the overlay.
  pool.cache_block(plain, key);
  pool.free_blocks({&plain, 1});
  EXPECT_EQ(pool.find_cached_block(key), plain);
  expect_ok(pool);
}

TEST(BlockPoolOverlay, CanAllocateIsExactAndNoBytesAreEverShared) {
  std::mt19937 rng(11);
  BlockPool pool = make_pool(9, 12);  // 8 plain blocks, 23 overlay ids
  std::vector<int32_t> held;
  int32_t overlay_used = 0, refused = 0;
  for (int32_t step = 0; step < 5000; ++step) {
    if (rng() % 3 != 0 || held.empty()) {
      const auto count = static_cast<int32_t>(rng() % 4);
      const auto staged = static_cast<int32_t>(rng() % (count + 1));
      const bool can = pool.can_allocate(count, staged);
      const std::optional<std::vector<int32_t>> blocks = pool.allocate(count, staged);
      ASSERT_EQ(can, blocks.has_value()) << "step " << step;
      if (!blocks) {
        ++refused;
      } else {
        for (int32_t i = 0; i < count; ++i) {
          EXPECT_EQ(pool.staging((*blocks)[i]) >= 0, i < staged);
          overlay_used += pool.is_overlay((*blocks)[i]) ? 1 : 0;
        }
        held.insert(held.end(), blocks->begin(), blocks->end());
      }
    } else {
      const size_t at = rng() % held.size();
      // Sealing gives a staging block back without freeing the block.
      if (pool.staging(held[at]) >= 0 && rng() % 2 == 0) {
        pool.release_staging(held[at]);
        continue;
      }
      pool.free_blocks({&held[at], 1});
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(at));
    }
    ASSERT_NO_FATAL_FAILURE(expect_no_shared_bytes(pool));
    ASSERT_NO_FATAL_FAILURE(expect_ok(pool));
  }
  EXPECT_GT(overlay_used, 500);
  EXPECT_GT(refused, 100);
  pool.free_blocks(held);
  EXPECT_EQ(pool.num_free_blocks(), pool.num_usable_blocks());
  EXPECT_EQ(pool.num_free_staging(), 12);
  expect_ok(pool);
}

}  // namespace
}  // namespace folio
