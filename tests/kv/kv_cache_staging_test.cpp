// KvCacheManager with a residual format (KIVI): every new block borrows a staging block until
// the pass that fills it seals it (cache_full_blocks gives the staging back); copy-on-write,
// swap out and swap in carry an unsealed block's staging with it; the prefix cache hands out
// only sealed blocks; running out of staging is a "no room" like running out of blocks; and
// nothing leaks (the pools' invariants count every staging block).
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv/kv_manager_checks.h"

namespace folio {
namespace {

using testing::expect_ok;
using testing::iota_tokens;

KvCacheConfig residual_config(int32_t staging, int32_t host_blocks = 0) {
  return KvCacheConfig{.num_blocks = 20,
                       .block_size = 4,
                       .num_host_blocks = host_blocks,
                       .enable_prefix_caching = true,
                       .num_staging_blocks = staging,
                       .num_host_staging_blocks = staging};
}

std::vector<int32_t> staged(const KvCacheManager& manager, SequenceId sequence, int32_t* first = nullptr) {
  std::vector<int32_t> staging;
  const int32_t index = manager.staged_blocks(sequence, &staging);
  if (first != nullptr) *first = index;
  return staging;
}

TEST(KvCacheStaging, NewBlocksBorrowStagingUntilTheirPassSealsThem) {
  KvCacheManager manager(residual_config(8));
  ASSERT_TRUE(manager.has_residual());
  const std::vector<int32_t> tokens = iota_tokens(10);
  ASSERT_TRUE(manager.allocate_slots(1, 10));  // 3 blocks, all unsealed during the pass
  int32_t first = -1;
  EXPECT_EQ(staged(manager, 1, &first).size(), 3u);
  EXPECT_EQ(first, 0);
  EXPECT_EQ(manager.device_pool().num_free_staging(), 5);
  expect_ok(manager);
  manager.cache_full_blocks(1, tokens);  // blocks 0 and 1 were filled: sealed
  EXPECT_EQ(staged(manager, 1, &first).size(), 1u);
  EXPECT_EQ(first, 2);
  EXPECT_EQ(manager.device_pool().num_free_staging(), 7);
  // Decode two tokens: the partial block fills (stays staged until its pass is done).
  ASSERT_TRUE(manager.allocate_slots(1, 2));
  EXPECT_EQ(staged(manager, 1).size(), 1u);
  manager.cache_full_blocks(1, iota_tokens(12));
  EXPECT_TRUE(staged(manager, 1).empty());
  expect_ok(manager);
  manager.free(1);
  EXPECT_EQ(manager.device_pool().num_free_staging(), 8);
  expect_ok(manager);
}

TEST(KvCacheStaging, PrefixHitsReuseSealedBlocksAndStageOnlyNewOnes) {
  KvCacheManager manager(residual_config(8));
  const std::vector<int32_t> tokens = iota_tokens(9);
  ASSERT_TRUE(manager.allocate_slots(1, 9));
  manager.cache_full_blocks(1, tokens);
  const PrefixMatch match = manager.find_cached_prefix(tokens);
  ASSERT_EQ(match.num_computed_tokens, 8);
  for (int32_t block : match.block_ids)
    EXPECT_EQ(manager.device_pool().staging(block), -1) << "a cached block is sealed";
  ASSERT_TRUE(manager.allocate_slots(2, 1, match));
  int32_t first = -1;
  EXPECT_EQ(staged(manager, 2, &first).size(), 1u);
  EXPECT_EQ(first, 2);
  expect_ok(manager);
}

TEST(KvCacheStaging, CopyOnWriteCopiesTheStagingOfTheSharedPartialBlock) {
  KvCacheManager manager(residual_config(8));
  ASSERT_TRUE(manager.allocate_slots(1, 6));
  manager.cache_full_blocks(1, iota_tokens(6));
  manager.fork(1, 2);
  const int32_t shared = manager.block_table(1)[1];
  const int32_t shared_staging = manager.device_pool().staging(shared);
  ASSERT_GE(shared_staging, 0);
  (void)manager.take_pending_copies();
  ASSERT_TRUE(manager.allocate_slots(2, 1));
  const std::vector<BlockCopy> copies = manager.take_pending_copies();
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src_block, shared);
  EXPECT_EQ(copies[0].src_staging, shared_staging);
  EXPECT_EQ(copies[0].dst_block, manager.block_table(2)[1]);
  EXPECT_EQ(copies[0].dst_staging, manager.device_pool().staging(manager.block_table(2)[1]));
  EXPECT_NE(copies[0].dst_staging, shared_staging);
  EXPECT_EQ(manager.device_pool().staging(shared), shared_staging) << "the parent keeps its own";
  expect_ok(manager);
}

TEST(KvCacheStaging, SwapCarriesUnsealedBlocksStagingBothWays) {
  KvCacheManager manager(residual_config(8, 10));
  ASSERT_TRUE(manager.allocate_slots(1, 7));
  manager.cache_full_blocks(1, iota_tokens(7));
  const int32_t tail = manager.block_table(1)[1];
  const int32_t tail_staging = manager.device_pool().staging(tail);
  (void)manager.take_pending_copies();
  const SequenceId ids[1] = {1};
  ASSERT_TRUE(manager.swap_out(ids));
  std::vector<BlockCopy> copies = manager.take_pending_copies();
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].src_staging, -1) << "the full block is sealed";
  EXPECT_EQ(copies[1].src_block, tail);
  EXPECT_EQ(copies[1].src_staging, tail_staging);
  const int32_t host_staging = copies[1].dst_staging;
  EXPECT_GE(host_staging, 0);
  EXPECT_EQ(manager.device_pool().num_free_staging(), 8);
  EXPECT_EQ(manager.host_pool().num_free_staging(), 7);
  expect_ok(manager);
  ASSERT_TRUE(manager.swap_in(ids));
  copies = manager.take_pending_copies();
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[1].src_staging, host_staging);
  EXPECT_EQ(copies[1].dst_staging, manager.device_pool().staging(manager.block_table(1)[1]));
  EXPECT_EQ(manager.host_pool().num_free_staging(), 8);
  expect_ok(manager);
}

TEST(KvCacheStaging, RunningOutOfStagingIsNoRoom) {
  KvCacheManager manager(residual_config(2));
  EXPECT_FALSE(manager.can_allocate_slots(1, 9)) << "3 new blocks, 2 staging blocks";
  EXPECT_FALSE(manager.allocate_slots(1, 9));
  EXPECT_FALSE(manager.contains(1));
  ASSERT_TRUE(manager.allocate_slots(1, 8));
  EXPECT_FALSE(manager.allocate_slots(2, 1)) << "both staging blocks are lent";
  manager.cache_full_blocks(1, iota_tokens(8));
  EXPECT_TRUE(manager.allocate_slots(2, 1));
  expect_ok(manager);
  // Swapping out needs host staging for the unsealed block: none here.
  KvCacheConfig config = residual_config(2, 10);
  config.num_host_staging_blocks = 0;
  KvCacheManager no_host(config);
  ASSERT_TRUE(no_host.allocate_slots(1, 3));
  const SequenceId ids[1] = {1};
  EXPECT_FALSE(no_host.can_swap_out(ids));
  EXPECT_FALSE(no_host.swap_out(ids));
  expect_ok(no_host);
}

TEST(KvCacheStaging, InvariantsCatchASealedPartialBlock) {
  KvCacheManager manager(residual_config(4));
  ASSERT_TRUE(manager.allocate_slots(1, 3));
  expect_ok(manager);
  // Sealing the partial block behind the manager's back (as a bug would) is reported.
  const_cast<BlockPool&>(manager.device_pool()).release_staging(manager.block_table(1)[0]);
  EXPECT_FALSE(manager.check_invariants().is_ok());
}

}  // namespace
}  // namespace folio
