// Tests for K/V bytes: KvCacheStorage::copy_block, HostKvPool round trips, ordered
// execute_block_copies, and that slot mapping + block tables put every token's K/V where
// attention will look for it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>
#include <numeric>
#include <random>
#include <vector>

#include "kv/block_copy.h"
#include "kv/host_kv_pool.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_cache_storage.h"
#include "kv_test_fill.h"

namespace folio {
namespace {

using testing::fake_kv_matches;
using testing::prefix_fingerprints;
using testing::write_fake_kv;

KvCacheShape small_shape(int32_t num_blocks) {
  return KvCacheShape{.num_layers = 3, .num_blocks = num_blocks, .block_size = 4, .num_kv_heads = 2, .head_dim = 8};
}

// Every element of a block, every layer, K then V: what "the block's contents" means.
std::vector<uint8_t> block_contents(const KvCacheStorage& storage, int32_t block) {
  std::vector<uint8_t> contents;
  for (int32_t layer = 0; layer < storage.shape().num_layers; ++layer) {
    for (uint8_t x : storage.block_keys(layer, block)) contents.push_back(x);
    for (uint8_t x : storage.block_values(layer, block)) contents.push_back(x);
  }
  return contents;
}

void fill_block(KvCacheStorage& storage, int32_t block, uint8_t seed) {
  for (int32_t layer = 0; layer < storage.shape().num_layers; ++layer) {
    uint8_t value = static_cast<uint8_t>(seed * 1000 + layer * 100);
    for (uint8_t& x : storage.block_keys(layer, block)) x = value++;
    for (uint8_t& x : storage.block_values(layer, block)) x = value++;
  }
}

// This process's resident set (Linux: /proc/self/statm's second field, in pages).
int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// A pool is address space until blocks are written: a 256 MiB pool costs the resident set
// nothing up front, and writing 8 blocks costs about their bytes. (So the CPU's default
// --kv-cache-memory is a ceiling, not a price a small model pays at start.)
TEST(KvCacheStorage, APoolCostsOnlyTheBlocksWritten) {
  const KvCacheShape shape{.num_layers = 30, .num_blocks = 750, .block_size = 16, .num_kv_heads = 3, .head_dim = 64};
  ASSERT_GT(shape.bytes_per_block() * shape.num_blocks, 256u << 20);
  const int64_t before = resident_bytes();
  KvCacheStorage storage(shape);
  const int64_t allocated = resident_bytes();
  EXPECT_LT(allocated - before, 4 << 20);
  for (int32_t block = 0; block < 8; ++block) fill_block(storage, block, static_cast<uint8_t>(block));
  const int64_t written = resident_bytes() - allocated;
  EXPECT_GE(written, static_cast<int64_t>(8 * shape.bytes_per_block() / 2));
  EXPECT_LT(written, static_cast<int64_t>(8 * shape.bytes_per_block()) + (4 << 20));
}

TEST(KvCacheStorage, BlockSpansMatchTheLayerViewLayout) {
  KvCacheStorage storage(small_shape(4));
  const KvCacheShape& shape = storage.shape();
  const size_t block_elements = shape.half_block_bytes();  // bytes
  for (int32_t layer = 0; layer < shape.num_layers; ++layer) {
    KvLayerView view = storage.layer(layer);
    EXPECT_EQ(storage.block_keys(layer, 2).data(), view.k + 2 * block_elements);
    EXPECT_EQ(storage.block_values(layer, 3).data(), view.v + 3 * block_elements);
    EXPECT_EQ(storage.block_keys(layer, 2).size(), block_elements);
  }
}

TEST(KvCacheStorage, CopyBlockMovesEveryLayerAndTouchesNothingElse) {
  KvCacheStorage storage(small_shape(4));
  for (int32_t block = 0; block < 4; ++block) fill_block(storage, block, static_cast<uint8_t>(block + 1));
  const std::vector<uint8_t> source = block_contents(storage, 1);
  const std::vector<uint8_t> bystander = block_contents(storage, 3);
  storage.copy_block(1, 2);
  EXPECT_EQ(block_contents(storage, 2), source);
  EXPECT_EQ(block_contents(storage, 1), source);
  EXPECT_EQ(block_contents(storage, 3), bystander);
}

TEST(HostKvPool, RoundTripRestoresTheBytes) {
  KvCacheStorage storage(small_shape(4));
  HostKvPool host(storage.shape(), 3);
  EXPECT_EQ(host.bytes(), 3 * storage.shape().bytes_per_block());
  fill_block(storage, 2, 7);
  const std::vector<uint8_t> original = block_contents(storage, 2);
  host.copy_to_host(storage, 2, 1);
  EXPECT_TRUE(std::ranges::equal(host.block_keys(1, 2), storage.block_keys(2, 2)));
  fill_block(storage, 2, 9);  // the device block is reused by someone else
  ASSERT_NE(block_contents(storage, 2), original);
  host.copy_from_host(1, storage, 3);
  EXPECT_EQ(block_contents(storage, 3), original);
}

TEST(KvCacheStorage, BlockCopiesRunInDecisionOrder) {
  // Decided in this order within one step: swap block 1 out to host 1, then reuse block 1 as
  // the destination of a copy-on-write from block 2, then swap host 1 back into block 3.
  KvCacheStorage storage(small_shape(4));
  HostKvPool host(storage.shape(), 2);
  fill_block(storage, 1, 1);
  fill_block(storage, 2, 2);
  const std::vector<uint8_t> swapped = block_contents(storage, 1);
  const std::vector<uint8_t> shared = block_contents(storage, 2);
  const std::vector<BlockCopy> copies = {{BlockCopyDirection::kDeviceToHost, 1, 1},
                                         {BlockCopyDirection::kDeviceToDevice, 2, 1},
                                         {BlockCopyDirection::kHostToDevice, 1, 3}};
  execute_block_copies(copies, storage, &host);
  EXPECT_EQ(block_contents(storage, 1), shared);
  EXPECT_EQ(block_contents(storage, 3), swapped);
  EXPECT_EQ(to_string(copies[0]), "device 1 -> host 1");
  EXPECT_EQ(to_string(copies[2]), "host 1 -> device 3");
}

TEST(KvCacheStorage, SlotMappingPutsEveryTokenWhereItsTableSays) {
  // Several sequences grow in interleaved steps (so their blocks interleave in the pool), one
  // forks and diverges; each step writes its new tokens at slot_mapping's slots. Reading every
  // position back through the block table must find that token's K/V.
  const int32_t block_size = 4;
  KvCacheManager manager({.num_blocks = 40, .block_size = block_size});
  KvCacheStorage storage(
      KvCacheShape{.num_layers = 2, .num_blocks = 40, .block_size = block_size, .num_kv_heads = 2, .head_dim = 4});
  std::mt19937 rng(5);
  std::vector<std::vector<int32_t>> tokens(4);
  // One forward pass for one sequence: reserve, run the decided copies, write the new K/V.
  auto append = [&](SequenceId sequence, int32_t count) {
    const int32_t first = static_cast<int32_t>(tokens[sequence].size());
    for (int32_t i = 0; i < count; ++i) tokens[sequence].push_back(static_cast<int32_t>(rng() % 1000));
    ASSERT_TRUE(manager.allocate_slots(sequence, count));
    execute_block_copies(manager.take_pending_copies(), storage, nullptr);
    std::vector<int32_t> slots;
    manager.append_slot_mapping(sequence, first, count, slots);
    const std::vector<uint64_t> fingerprints = prefix_fingerprints(tokens[sequence], 0);
    for (int32_t i = 0; i < count; ++i) write_fake_kv(storage, slots[i], fingerprints[first + i]);
  };
  for (int32_t round = 0; round < 12; ++round) {
    for (SequenceId sequence = 0; sequence < 3; ++sequence) append(sequence, 1 + static_cast<int32_t>(rng() % 5));
    if (round == 5) {
      manager.fork(0, 3);
      tokens[3] = tokens[0];
    }
    if (round > 5) append(3, 1);  // the child diverges: copy-on-write before its first write
  }
  for (SequenceId sequence = 0; sequence < 4; ++sequence) {
    const std::vector<uint64_t> fingerprints = prefix_fingerprints(tokens[sequence], 0);
    ASSERT_EQ(manager.num_tokens(sequence), static_cast<int32_t>(tokens[sequence].size()));
    for (int32_t position = 0; position < manager.num_tokens(sequence); ++position) {
      EXPECT_TRUE(fake_kv_matches(storage, manager.block_table(sequence), position, fingerprints[position]))
          << "sequence " << sequence << " position " << position;
    }
  }
  EXPECT_GT(manager.metrics().num_copy_on_write_blocks, 0);
  const Status status = manager.check_invariants();
  EXPECT_TRUE(status.is_ok()) << status.message();
}

}  // namespace
}  // namespace folio
