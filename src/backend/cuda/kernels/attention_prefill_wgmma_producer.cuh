// The wgmma prefill kernel's shared-memory layout, barriers and its producer warpgroup's two
// forms (attention_prefill_wgmma.cu has the consumers, the kernel and the launch): produce,
// all four warps copying every K / V tile with cp.async through a slot table, and produce_tma,
// warp 0 issuing bulk tensor copies. Included by that one file only.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/bulk_copy.cuh"
#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/kernels/kernels.h"
#include "backend/cuda/wgmma.cuh"

namespace folio::cuda::prefill::wgmma_prefill {

using namespace detail;

constexpr int kHeadDim = 128;
constexpr int kBlockM = 128;  // query rows a CTA: two consumer warpgroups of 64
constexpr int kStages = 3;
constexpr int kThreads = 384;
constexpr uint32_t kHalfBytes = 128 * 128;       // 128 rows x 64 dims x 2 bytes
constexpr uint32_t kTileBytes = 2 * kHalfBytes;  // both dim halves
// Q, then per stage K and V, then the barriers; + 1 KB to align the base to 1,024 bytes.
constexpr uint32_t kBarrierOffset = kTileBytes * (1 + 2 * kStages);
// The producer's slot table (two tiles' key slots) after the barriers.
constexpr uint32_t kSlotOffset = kBarrierOffset + 128;
static_assert((3 * kStages + 2) * sizeof(uint64_t) <= 128, "the barriers fit before the slot table");
constexpr size_t kSmemBytes = kSlotOffset + 2 * 128 * sizeof(int32_t) + 1024;

// The layer's K and V caches as tensor maps (tensor_map.h), for the bulk tensor copies.
struct KvTensorMaps {
  CUtensorMap k, v;
};
constexpr int kTileN = 128;  // keys a K / V tile
#if FOLIO_WGMMA
constexpr int kProducerThreads = 128;
// Arrivals that complete a phase: every producer thread (its own copies landed) for a full
// barrier; the first lane of each consumer warp for an empty one.
constexpr uint32_t kFullArrivals = kProducerThreads;
constexpr uint32_t kEmptyArrivals = 8;

__device__ __forceinline__ void copy_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void copy_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}
template <int kRegisters>
__device__ __forceinline__ void registers_down() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void registers_up() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegisters));
}
template <int kN>
__device__ __forceinline__ void pin_all(float (&r)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) wgmma::pin(r[i]);
}

// Byte offset of 16-byte chunk `chunk` (0..15 over head_dim 128) of row `row` in a tile.
__device__ __forceinline__ uint32_t tile_offset(int row, int chunk) {
  return static_cast<uint32_t>(chunk / 8) * kHalfBytes + wgmma::swizzled_offset(row, (chunk % 8) * 16);
}

// Per stage: full (the tile's K and V landed), and K and V released apart (a consumer is done
// with K once its S is computed, with V once its P V is).
struct Barriers {
  uint64_t* full;  // [kStages]
  uint64_t* empty_k;
  uint64_t* empty_v;
  uint64_t* q_full;   // Q landed (bulk tensor copy mode: Q has a barrier of its own)
  uint64_t* q_empty;  // the consumers are done with Q (persistent mode: the next item's may come)
};
// Arrivals on q_full: the producer's warps 1-3 (warp 0 issues the tensor copies).
constexpr uint32_t kQArrivals = kProducerThreads - 32;

// The CTA's 128 query rows of Q (zeros past query_len) into the Q tile with cp.async, by
// `threads` threads of which this is thread t: 16-byte chunk i of the tile (row i / 16) by
// thread i % threads.
__device__ __forceinline__ void copy_q(const PagedAttentionArgs& args, uint8_t* smem, int t, int threads, int head,
                                       int m0, int query_start, int query_len) {
#pragma unroll 4
  for (int i = t; i < kBlockM * 16; i += threads) {
    const int row = i / 16, chunk = i % 16;
    const bool valid = m0 + row < query_len;
    const uint16_t* src = args.q;
    if (valid) src += (static_cast<size_t>(query_start + m0 + row) * args.num_heads + head) * kHeadDim + chunk * 8;
    cp_async_16(smem + tile_offset(row, chunk), src, valid);
  }
}

// Warpgroup 0: Q with tile 0's K, then every K / V tile into the ring.
__device__ __forceinline__ void produce(const PagedAttentionArgs& args, uint8_t* smem, const Barriers& bars, int tid,
                                        int head, int seq, int m0, int query_start, int query_len, int kv_end,
                                        int num_tiles) {
  const KvLayerView& cache = args.cache;
  const int kv_head = head / (args.num_heads / cache.num_kv_heads);
  const int32_t* block_table = args.block_tables + static_cast<size_t>(seq) * args.max_blocks_per_seq;
  const BlockIndexer indexer(cache.block_size);
  const int chunk = tid % 16;
  const int row0 = tid / 16;  // rows row0 + 8 i
  const size_t token_stride = static_cast<size_t>(cache.num_kv_heads) * kHeadDim;
  const size_t head_offset = static_cast<size_t>(kv_head) * kHeadDim + chunk * 8;

  copy_q(args, smem, tid, kProducerThreads, head, m0, query_start, query_len);
  // Each thread looks up one key's slot a tile (the next tile's while this one's copies go
  // out) into a shared table the copies read: a block-table load per copy made the producer
  // wait on global-memory latency in series (and it has few registers for more in flight).
  int32_t* slot_table = reinterpret_cast<int32_t*>(smem + kSlotOffset);  // [2][kTileN]
  auto slot_of = [&](int key) {
    return key < kv_end ? __ldg(block_table + indexer.block(key)) * indexer.size + indexer.offset(key) : -1;
  };
  auto load = [&](const uint16_t* base, uint8_t* tile, const int32_t* slots) {
#pragma unroll 4
    for (int i = 0; i < kTileN / 8; ++i) {
      const int row = row0 + 8 * i;
      const int slot = slots[row];
      const size_t offset = slot >= 0 ? static_cast<size_t>(slot) * token_stride + head_offset : 0;
      cp_async_16(tile + tile_offset(row, chunk), base + offset, slot >= 0);  // zeros past the end
    }
  };
  // Tile j's copies are issued before tile j - 1 is announced, so two tiles are in flight while
  // the consumers work on a third (the ring has three stages). A thread's copies are made
  // visible to the tensor cores (the async proxy) before it counts them.
  auto announce = [&](int stage) {
    wgmma::fence_async_shared();
    mbarrier_arrive(&bars.full[stage]);
  };
  int next_slot = slot_of(tid);
  for (int j = 0; j < num_tiles; ++j) {
    const int stage = j % kStages;
    const uint32_t empty_parity = ((j / kStages) + 1) & 1;  // the phase that freed tile j - kStages
    uint8_t* k_tile = smem + kTileBytes * (1 + 2 * stage);
    uint8_t* v_tile = k_tile + kTileBytes;
    // Two tables taking turns: a thread writes tile j + 1's only after every producer thread
    // has passed tile j's barrier, so after its reads of tile j - 1's.
    int32_t* slots = slot_table + (j & 1) * kTileN;
    slots[tid] = next_slot;
    named_barrier_sync<3, kProducerThreads>();
    next_slot = slot_of((j + 1) * kTileN + tid);
    if (j >= kStages) mbarrier_wait(&bars.empty_k[stage], empty_parity);
    load(cache.fp16_keys(), k_tile, slots);
    if (j >= kStages) mbarrier_wait(&bars.empty_v[stage], empty_parity);
    load(cache.fp16_values(), v_tile, slots);
    copy_commit();
    if (j > 0) {
      copy_wait<1>();  // tile j - 1's copies (and Q's, with tile 0) have landed
      announce((j - 1) % kStages);
    }
  }
  copy_wait<0>();
  announce((num_tiles - 1) % kStages);
}

// The producer with bulk tensor copies (kTma): warp 0 issues each tile whose keys all lie before
// kv_end as boxes of whole block rows (one box a cache block, or a 128-key part of a larger one,
// for each dim half of K and of V: 32 boxes a tile with 16-slot blocks, a lane each), the copy
// engine swizzling them as wgmma reads them and counting their bytes on the stage's full
// barrier; no thread computes an address or waits on a copy. Warps 1-3 copy Q with cp.async,
// then the one tile that reaches past kv_end (zeros after it: a stale slot of a partly filled
// block may hold anything, and 0 x NaN in P V is NaN).
// Persistent mode: g_base is the CTA's count of tiles before this item (stages and phases run
// on across items) and item its count of items before this one.
__device__ __forceinline__ void produce_tma(const PagedAttentionArgs& args, const KvTensorMaps& maps, uint8_t* smem,
                                            const Barriers& bars, int tid, int head, int seq, int m0, int query_start,
                                            int query_len, int kv_end, int num_tiles, int g_base, int item) {
  const KvLayerView& cache = args.cache;
  const int kv_head = head / (args.num_heads / cache.num_kv_heads);
  const int32_t* block_table = args.block_tables + static_cast<size_t>(seq) * args.max_blocks_per_seq;
  const int block_size = cache.block_size;
  const int full_tiles = kv_end / kTileN;
  // g: the tile's number in the CTA's sequence of tiles (its stage and phases).
  auto stage_tile = [&](int g) { return smem + kTileBytes * (1 + 2 * (g % kStages)); };
  auto wait_free = [&](int g) {
    if (g < kStages) return;
    const uint32_t parity = ((g / kStages) + 1) & 1;  // the phase that freed tile g - kStages
    mbarrier_wait(&bars.empty_k[g % kStages], parity);
    mbarrier_wait(&bars.empty_v[g % kStages], parity);
  };
  if (tid < 32) {
    const int lane = tid;
    const int rows = block_size < kTileN ? block_size : kTileN;  // slots a box
    const int boxes = kTileN / rows;                             // boxes a dim half of K or V
    if (lane == 0) {
      prefetch_tensor_map(&maps.k);
      prefetch_tensor_map(&maps.v);
    }
    for (int j = 0; j < num_tiles; ++j) {
      // Warp 0 waits for every stage in tile order: a parity names one of two phases, so a
      // waiter that skipped a phase of its stage could pass one early.
      const int g = g_base + j;
      wait_free(g);
      if (j == full_tiles) {  // the partial tile's stage is free: warps 1-3 copy it
        // A rendezvous, not an arrival: in persistent mode warp 0 could otherwise hand over
        // the next item's stage too before warps 1-3 took this one.
        named_barrier_sync(4, kProducerThreads);
        break;
      }
      uint64_t* full = &bars.full[g % kStages];
      if (lane == 0) mbarrier_arrive_expect_tx(full, 2 * kTileBytes);
      __syncwarp();
      for (int i = lane; i < 4 * boxes; i += 32) {
        const int tensor = i / (2 * boxes), half = (i / boxes) % 2, part = i % boxes;
        const int key = j * kTileN + part * rows;
        const int slot = __ldg(block_table + key / block_size) * block_size + key % block_size;
        uint8_t* dst = stage_tile(g) + tensor * kTileBytes + half * kHalfBytes + part * rows * 128;
        tensor_copy_3d_to_shared(dst, tensor == 0 ? &maps.k : &maps.v, half * 64, kv_head, slot, full);
      }
    }
    return;
  }
  const int t = tid - 32;
  constexpr int kCopiers = kProducerThreads - 32;
  if (item > 0) mbarrier_wait(bars.q_empty, (item - 1) & 1);  // the previous item's Q is read
  copy_q(args, smem, t, kCopiers, head, m0, query_start, query_len);
  copy_commit();
  copy_wait<0>();
  wgmma::fence_async_shared();
  mbarrier_arrive(bars.q_full);
  if (full_tiles == num_tiles) return;
  const int j = full_tiles;  // the last tile, partly past kv_end
  const int g = g_base + j;
  named_barrier_sync(4, kProducerThreads);  // warp 0 saw its stage freed
  const BlockIndexer indexer(block_size);
  const size_t token_stride = static_cast<size_t>(cache.num_kv_heads) * kHeadDim;
  for (int i = t; i < kTileN * 16; i += kCopiers) {
    const int row = i / 16, chunk = i % 16;
    const int key = j * kTileN + row;
    const bool valid = key < kv_end;
    size_t offset = 0;
    if (valid) {
      const int slot = __ldg(block_table + indexer.block(key)) * indexer.size + indexer.offset(key);
      offset = static_cast<size_t>(slot) * token_stride + static_cast<size_t>(kv_head) * kHeadDim + chunk * 8;
    }
    cp_async_16(stage_tile(g) + tile_offset(row, chunk), cache.fp16_keys() + offset, valid);
    cp_async_16(stage_tile(g) + kTileBytes + tile_offset(row, chunk), cache.fp16_values() + offset, valid);
  }
  copy_commit();
  copy_wait<0>();
  wgmma::fence_async_shared();
  named_barrier_sync<3, kCopiers>();
  if (t == 0) mbarrier_arrive(&bars.full[g % kStages]);
}

#endif  // FOLIO_WGMMA

}  // namespace folio::cuda::prefill::wgmma_prefill
