// Tests for src/kv/block_hash: a block's identity changes with anything its K/V depend on, and
// the 64-bit hash behaves like a random function on structured inputs.
#include <gtest/gtest.h>

#include <bit>
#include <random>
#include <unordered_set>
#include <vector>

#include "kv/block_hash.h"

namespace folio {
namespace {

TEST(BlockHash, DependsOnParentTokensAndExtraKey) {
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  const uint64_t base = hash_block(kRootBlockHash, tokens, kNoExtraKey);
  EXPECT_EQ(base, hash_block(kRootBlockHash, tokens, kNoExtraKey));
  EXPECT_NE(base, hash_block(base, tokens, kNoExtraKey));
  EXPECT_NE(base, hash_block(kRootBlockHash, tokens, 7));
  EXPECT_NE(base, hash_block(kRootBlockHash, std::vector<int32_t>{1, 2, 4, 3}, kNoExtraKey));
  EXPECT_NE(base, hash_block(kRootBlockHash, std::vector<int32_t>{1, 2, 3, 5}, kNoExtraKey));
}

TEST(BlockHash, LengthIsPartOfTheIdentity) {
  // An odd tail is padded with zero inside a word; the absorbed length keeps it apart.
  EXPECT_NE(hash_block(kRootBlockHash, std::vector<int32_t>{5}, 0),
            hash_block(kRootBlockHash, std::vector<int32_t>{5, 0}, 0));
  EXPECT_NE(hash_block(kRootBlockHash, std::vector<int32_t>{}, 0),
            hash_block(kRootBlockHash, std::vector<int32_t>{0}, 0));
  EXPECT_NE(hash_block(kRootBlockHash, std::vector<int32_t>{0, 0}, 0),
            hash_block(kRootBlockHash, std::vector<int32_t>{0, 0, 0, 0}, 0));
}

TEST(BlockHash, ChainSeparatesEqualBlocksAtDifferentDepths) {
  const std::vector<int32_t> tokens(16, 42);
  const uint64_t first = hash_block(kRootBlockHash, tokens, 0);
  const uint64_t second = hash_block(first, tokens, 0);
  const uint64_t third = hash_block(second, tokens, 0);
  EXPECT_NE(first, second);
  EXPECT_NE(second, third);
  EXPECT_NE(first, third);
}

TEST(BlockHash, NoCollisionsOverManyNearbyBlocks) {
  // Blocks differing in one token by small amounts: the structured case weak hashes fail on.
  std::unordered_set<uint64_t> seen;
  std::vector<int32_t> tokens(16, 0);
  int32_t count = 0;
  for (int32_t position = 0; position < 16; ++position) {
    for (int32_t value = 0; value < 4000; ++value) {
      tokens.assign(16, 0);
      tokens[position] = value;
      seen.insert(hash_block(kRootBlockHash, tokens, 0));
      ++count;
    }
  }
  // value 0 at every position is the same all-zero block.
  EXPECT_EQ(static_cast<int32_t>(seen.size()), count - 15);
}

TEST(BlockHash, OutputBitsAreBalanced) {
  // Each output bit should flip for about half of single-bit input changes (avalanche).
  std::mt19937_64 rng(1);
  std::vector<int32_t> tokens(16);
  int64_t flipped = 0;
  const int32_t trials = 2000;
  for (int32_t trial = 0; trial < trials; ++trial) {
    for (int32_t& token : tokens) token = static_cast<int32_t>(rng() % 50000);
    const uint64_t before = hash_block(kRootBlockHash, tokens, 0);
    tokens[rng() % 16] ^= 1 << (rng() % 16);
    flipped += std::popcount(before ^ hash_block(kRootBlockHash, tokens, 0));
  }
  const double mean = static_cast<double>(flipped) / trials;
  EXPECT_NEAR(mean, 32.0, 1.0);
}

TEST(BlockHash, ExtraKeysAreOrderedAndNeverNone) {
  const std::vector<uint64_t> ab = {1, 2};
  const std::vector<uint64_t> ba = {2, 1};
  EXPECT_NE(hash_extra_keys(ab), hash_extra_keys(ba));
  EXPECT_NE(hash_extra_keys(std::vector<uint64_t>{}), kNoExtraKey);
  EXPECT_NE(hash_extra_keys(std::vector<uint64_t>{0}), kNoExtraKey);
}

TEST(BlockHash, KeyCarriesItsInputs) {
  const std::vector<int32_t> tokens = {9, 8, 7};
  const BlockKey key = make_block_key(123, tokens, 5);
  EXPECT_EQ(key.hash, hash_block(123, tokens, 5));
  EXPECT_EQ(key.parent_hash, 123u);
  EXPECT_EQ(key.extra_key, 5u);
  EXPECT_EQ(key.token_ids.size(), 3u);
}

}  // namespace
}  // namespace folio
