// Varlen paged prefill attention on tensor cores: the 128-row kernels (kRows128, kRows128v2,
// kRows128v3) and the dispatcher. The 64-row kernel, FlashAttention-2's algorithm in its plainest
// form and the one the quantized formats use, is attention_prefill_rows64.cu (its comment
// describes the algorithm all of them share).
#include <cassert>
#include <cmath>
#include <type_traits>

#include "backend/cuda/kernels/attention_prefill_common.cuh"
#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/kernels/kernels.h"

namespace folio::cuda {
namespace {

using namespace detail;
using prefill::kBlockN;
using prefill::swizzled;

// --- PrefillKernel::kRows128 ----------------------------------------------------------------
//
// The same algorithm with 128 query rows per CTA: 8 warps of 16 rows share each K/V tile, so
// a tile crosses L2 -> shared memory once per 128 rows instead of once per 64 (at 8k causal
// the 64-row kernel moves ~35 GB through L2). A 3-stage ring: the copy of tile j+2 is issued
// right after the one barrier of iteration j, which also proves that every warp is done with
// the stage it overwrites (tile j-1's), so no trailing barrier. Softmax: the max is kept in
// raw-score units and the scale is folded into one FMA before ex2.approx.ftz. Causal work is
// cut per warp: a warp skips a K/V tile that lies wholly after its last row (the CTA's last
// tiles), and warps whose rows are all past query_len skip the math. A row's bits depend
// only on its own position, query_len and context_len (tile boundaries are fixed multiples
// of 64 keys; a skipped or fully masked tile leaves the row's state unchanged), so batch
// invariance holds as for the 64-row kernel.
constexpr int kWideBlockM = 128;
constexpr int kWideThreads = 256;
constexpr int kWideStages = 3;

template <int kHeadDim>
struct WidePrefillShape {
  static constexpr int kChunks = kHeadDim / 8;
  static constexpr int kQHalfs = kWideBlockM * kHeadDim;
  static constexpr int kKvHalfs = kBlockN * kHeadDim;
  static constexpr size_t kSmemBytes = (kQHalfs + 2ull * kWideStages * kKvHalfs) * sizeof(uint16_t);
};

__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

template <int kHeadDim>
__global__ void __launch_bounds__(kWideThreads, kHeadDim <= 64 ? 2 : 1)
    prefill_wide_kernel(const PagedAttentionArgs args, bool skip_single_query) {
  using S = WidePrefillShape<kHeadDim>;
  extern __shared__ __align__(128) unsigned char smem[];
  uint16_t* q_smem = reinterpret_cast<uint16_t*>(smem);
  uint16_t* kv_smem = q_smem + S::kQHalfs;  // [stage][K|V][kBlockN][kHeadDim], swizzled

  const int tile = gridDim.x - 1 - blockIdx.x;
  const int head = blockIdx.y;
  const int seq = blockIdx.z;
  const int query_start = args.cu_query_starts[seq];
  const int query_len = args.cu_query_starts[seq + 1] - query_start;
  const int m0 = tile * kWideBlockM;
  if (m0 >= query_len || (skip_single_query && query_len == 1)) return;

  const KvLayerView& cache = args.cache;
  const int context_len = args.context_lens[seq];
  const int pos0 = context_len - query_len + m0;  // position of the tile's first row
  const int kv_head = head / (args.num_heads / cache.num_kv_heads);
  const int kv_end = min(context_len, pos0 + kWideBlockM);  // keys the last row can see
  const int num_tiles = (kv_end + kBlockN - 1) / kBlockN;
  const int32_t* block_table = args.block_tables + static_cast<size_t>(seq) * args.max_blocks_per_seq;
  const size_t token_stride = static_cast<size_t>(cache.num_kv_heads) * kHeadDim;
  const BlockIndexer indexer(cache.block_size);

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int group_row = lane / 4;
  const int quad_lane = lane % 4;

#pragma unroll
  for (int i = 0; i < S::kQHalfs / 8 / kWideThreads; ++i) {
    const int c = tid + i * kWideThreads;
    const int row = c / S::kChunks;
    const int chunk = c % S::kChunks;
    const bool valid = m0 + row < query_len;
    const uint16_t* src = args.q;
    if (valid) {
      src += (static_cast<size_t>(query_start + m0 + row) * args.num_heads + head) * kHeadDim + chunk * 8;
    }
    cp_async_16(q_smem + swizzled<kHeadDim>(row, chunk), src, valid);
  }

  // A thread copies chunk `kv_chunk` of rows kv_row + i * kKvRowsPerPass of every K/V tile.
  // The block table is read one tile ahead into registers (slot_delta: slot - key, so the copy
  // needs no division and no dependent global load), and all of a tile's reads are issued
  // back to back: a lookup then never stalls the copy that overlaps the math.
  constexpr int kKvPasses = S::kKvHalfs / 8 / kWideThreads;
  constexpr int kKvRowsPerPass = kWideThreads / S::kChunks;
  const int kv_row = tid / S::kChunks;
  const int kv_chunk = tid % S::kChunks;
  const size_t head_offset = static_cast<size_t>(kv_head) * kHeadDim + kv_chunk * 8;
  auto fetch_slots = [&](int kv_tile, int(&slot_delta)[kKvPasses]) {
    if (indexer.pow2) {
#pragma unroll
      for (int i = 0; i < kKvPasses; ++i) {
        const int key = kv_tile * kBlockN + kv_row + i * kKvRowsPerPass;
        const int logical = key >> indexer.shift;
        slot_delta[i] = key < kv_end ? (__ldg(block_table + logical) - logical) * indexer.size : 0;
      }
    } else {
#pragma unroll
      for (int i = 0; i < kKvPasses; ++i) {
        const int key = kv_tile * kBlockN + kv_row + i * kKvRowsPerPass;
        const int logical = key / indexer.size;
        slot_delta[i] = key < kv_end ? (__ldg(block_table + logical) - logical) * indexer.size : 0;
      }
    }
  };
  auto load_kv = [&](int kv_tile, int stage, const int(&slot_delta)[kKvPasses]) {
    uint16_t* k_dst = kv_smem + stage * 2 * S::kKvHalfs;
    uint16_t* v_dst = k_dst + S::kKvHalfs;
#pragma unroll
    for (int i = 0; i < kKvPasses; ++i) {
      const int row = kv_row + i * kKvRowsPerPass;
      const int key = kv_tile * kBlockN + row;
      const bool valid = key < kv_end;
      const size_t offset = valid ? static_cast<size_t>(key + slot_delta[i]) * token_stride + head_offset : 0;
      const int dst = swizzled<kHeadDim>(row, kv_chunk);
      cp_async_16(k_dst + dst, cache.fp16_keys() + offset, valid);
      cp_async_16(v_dst + dst, cache.fp16_values() + offset, valid);
    }
  };

  // Group g holds K/V tile g (group 0 also Q); a group is committed even when empty so that
  // "all but the newest group done" always means "tile j landed".
  int slots[kKvPasses];
  fetch_slots(0, slots);
  load_kv(0, 0, slots);
  cp_async_commit();
  fetch_slots(1, slots);
  if (num_tiles > 1) load_kv(1, 1, slots);
  cp_async_commit();
  fetch_slots(2, slots);  // slots always holds tile j+2's at the top of iteration j

  uint32_t q_frag[kHeadDim / 16][4];
  float o[kHeadDim / 8][4];
#pragma unroll
  for (int nb = 0; nb < kHeadDim / 8; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[nb][e] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY};  // raw (unscaled) scores
  float row_sum[2] = {0.0f, 0.0f};            // this thread's share; the quad is summed at the end
  const float score_scale = args.scale * kLog2e;
  const int row_lo = warp * 16 + group_row;  // this thread's rows: row_lo and row_lo + 8
  const int warp_pos0 = pos0 + warp * 16;    // position of the warp's first row
  const bool warp_has_rows = m0 + warp * 16 < query_len;

  int stage = 0;  // j % kWideStages
  for (int j = 0; j < num_tiles; ++j) {
    cp_async_wait<1>();
    __syncthreads();  // tile j visible to all; every warp is done with tile j-1's stage
    {
      const int next = j + 2;
      const int next_stage = stage == 0 ? 2 : stage - 1;  // (j + 2) % 3
      if (next < num_tiles) load_kv(next, next_stage, slots);
      cp_async_commit();
      fetch_slots(j + 3, slots);  // lands while this tile's math runs
    }
    if (j == 0) {
#pragma unroll
      for (int ks = 0; ks < kHeadDim / 16; ++ks) {
        ldmatrix_x4(q_frag[ks], q_smem + swizzled<kHeadDim>(warp * 16 + lane % 16, ks * 2 + lane / 16));
      }
    }
    const int key0 = j * kBlockN;
    // Warp-uniform: tile 0 is never skipped by a warp with rows (key 0 is visible to all).
    if (warp_has_rows && key0 <= warp_pos0 + 15) {
      const uint16_t* k_tile = kv_smem + stage * 2 * S::kKvHalfs;
      const uint16_t* v_tile = k_tile + S::kKvHalfs;

      float s[kBlockN / 8][4];
#pragma unroll
      for (int nb = 0; nb < kBlockN / 8; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[nb][e] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < kHeadDim / 16; ++ks) {
#pragma unroll
        for (int p = 0; p < kBlockN / 16; ++p) {
          uint32_t b[4];
          ldmatrix_x4(b, k_tile + swizzled<kHeadDim>(16 * p + lane % 8 + (lane / 16) * 8, ks * 2 + (lane / 8) % 2));
          mma_16816(s[2 * p], q_frag[ks], b[0], b[1]);
          mma_16816(s[2 * p + 1], q_frag[ks], b[2], b[3]);
        }
      }

      if (key0 + kBlockN - 1 > warp_pos0 || key0 + kBlockN > context_len) {
#pragma unroll
        for (int nb = 0; nb < kBlockN / 8; ++nb) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = key0 + nb * 8 + 2 * quad_lane + (e & 1);
            const int position = pos0 + row_lo + (e >= 2 ? 8 : 0);
            if (key > position || key >= context_len) s[nb][e] = -INFINITY;
          }
        }
      }
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float tile_max = -INFINITY;
#pragma unroll
        for (int nb = 0; nb < kBlockN / 8; ++nb) {
          tile_max = fmaxf(tile_max, fmaxf(s[nb][2 * half], s[nb][2 * half + 1]));
        }
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
        // Finite: key 0 is visible to every row in tile 0, and row_max carries it afterwards.
        const float new_max = fmaxf(row_max[half], tile_max);
        // Exactly 1 when the max did not move; 0 on the first tile (row_max = -inf).
        const float alpha = exp2_ftz((row_max[half] - new_max) * score_scale);
        row_max[half] = new_max;
        const float neg_max_scaled = -new_max * score_scale;
        float sum = 0.0f;
#pragma unroll
        for (int nb = 0; nb < kBlockN / 8; ++nb) {
          s[nb][2 * half] = exp2_ftz(fmaf(s[nb][2 * half], score_scale, neg_max_scaled));
          s[nb][2 * half + 1] = exp2_ftz(fmaf(s[nb][2 * half + 1], score_scale, neg_max_scaled));
          sum += s[nb][2 * half] + s[nb][2 * half + 1];
        }
        row_sum[half] = row_sum[half] * alpha + sum;
#pragma unroll
        for (int nb = 0; nb < kHeadDim / 8; ++nb) {
          o[nb][2 * half] *= alpha;
          o[nb][2 * half + 1] *= alpha;
        }
      }

#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        const uint32_t a[4] = {pack_half2(s[2 * kk][0], s[2 * kk][1]), pack_half2(s[2 * kk][2], s[2 * kk][3]),
                               pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                               pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
        for (int dp = 0; dp < kHeadDim / 16; ++dp) {
          uint32_t b[4];
          ldmatrix_x4_trans(b,
                            v_tile + swizzled<kHeadDim>(16 * kk + lane % 8 + ((lane / 8) % 2) * 8, dp * 2 + lane / 16));
          mma_16816(o[2 * dp], a, b[0], b[1]);
          mma_16816(o[2 * dp + 1], a, b[2], b[3]);
        }
      }
    }
    stage = stage == kWideStages - 1 ? 0 : stage + 1;
  }
  cp_async_wait<0>();  // no copy may outlive the CTA's shared memory

#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float sum = row_sum[half];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = 1.0f / sum;
    const int row = row_lo + half * 8;
    if (m0 + row >= query_len) continue;
    uint16_t* dst = args.out + (static_cast<size_t>(query_start + m0 + row) * args.num_heads + head) * kHeadDim;
#pragma unroll
    for (int nb = 0; nb < kHeadDim / 8; ++nb) {
      *reinterpret_cast<uint32_t*>(dst + nb * 8 + 2 * quad_lane) =
          pack_bf162(o[nb][2 * half] * inv, o[nb][2 * half + 1] * inv);
    }
  }
}

// --- PrefillKernel::kRows128v2 --------------------------------------------------------------
//
// FA2's register blocking: 4 warps x 32 query rows (two m16 tiles per warp) = 128 rows per
// CTA. Every K / V fragment a warp loads with ldmatrix feeds 4 mma.sync instead of 2, halving
// the shared-memory traffic per FLOP. Q is not held in registers (O 32x128 fp32 = 128 and
// S 32x64 = 64 registers per thread are); its fragments are reloaded from shared memory per
// k-step. A 2-stage K/V ring (96 KB with Q at head_dim 128) so that two CTAs share an SM:
// their barriers are independent, so one CTA's softmax overlaps the other's mma.sync. One
// barrier per tile: at the top of iteration j it proves tile j landed and every warp is done
// with tile j-1, whose stage then receives tile j+1. The grid is (heads, seqs, query tiles)
// with the tile index reversed, so all of the heaviest causal tiles launch first (longest
// processing time first across the whole grid). Numerics per row are those of kRows128
// (64-key tiles from key 0, raw-score max, one FMA then ex2.approx.ftz), so a row's bits
// depend only on its own position, query_len and context_len: batch invariance holds.
constexpr int kV2BlockM = 128;
constexpr int kV2Threads = 128;
constexpr int kV2WarpRows = 32;
constexpr int kV2MTiles = kV2WarpRows / 16;

template <int kHeadDim>
struct V2PrefillShape {
  static constexpr int kChunks = kHeadDim / 8;
  static constexpr int kQHalfs = kV2BlockM * kHeadDim;
  static constexpr int kKvHalfs = kBlockN * kHeadDim;
  static constexpr size_t kSmemBytes = (kQHalfs + 2ull * 2 * kKvHalfs) * sizeof(uint16_t) + 2 * kBlockN * sizeof(int);
};

template <int kHeadDim>
__global__ void __launch_bounds__(kV2Threads, 2)
    prefill_v2_kernel(const PagedAttentionArgs args, bool skip_single_query) {
  using S = V2PrefillShape<kHeadDim>;
  extern __shared__ __align__(128) unsigned char smem[];
  uint16_t* q_smem = reinterpret_cast<uint16_t*>(smem);
  uint16_t* kv_smem = q_smem + S::kQHalfs;  // [stage][K|V][kBlockN][kHeadDim], swizzled

  const int head = blockIdx.x;
  const int seq = blockIdx.y;
  const int tile = gridDim.z - 1 - blockIdx.z;
  const int query_start = args.cu_query_starts[seq];
  const int query_len = args.cu_query_starts[seq + 1] - query_start;
  const int m0 = tile * kV2BlockM;
  if (m0 >= query_len || (skip_single_query && query_len == 1)) return;

  const KvLayerView& cache = args.cache;
  const int context_len = args.context_lens[seq];
  const int pos0 = context_len - query_len + m0;
  const int kv_head = head / (args.num_heads / cache.num_kv_heads);
  const int kv_end = min(context_len, pos0 + kV2BlockM);
  const int num_tiles = (kv_end + kBlockN - 1) / kBlockN;
  const int32_t* block_table = args.block_tables + static_cast<size_t>(seq) * args.max_blocks_per_seq;
  const size_t token_stride = static_cast<size_t>(cache.num_kv_heads) * kHeadDim;
  const BlockIndexer indexer(cache.block_size);

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int group_row = lane / 4;
  const int quad_lane = lane % 4;

#pragma unroll
  for (int i = 0; i < S::kQHalfs / 8 / kV2Threads; ++i) {
    const int c = tid + i * kV2Threads;
    const int row = c / S::kChunks;
    const int chunk = c % S::kChunks;
    const bool valid = m0 + row < query_len;
    const uint16_t* src = args.q;
    if (valid) {
      src += (static_cast<size_t>(query_start + m0 + row) * args.num_heads + head) * kHeadDim + chunk * 8;
    }
    cp_async_16(q_smem + swizzled<kHeadDim>(row, chunk), src, valid);
  }

  constexpr int kKvPasses = S::kKvHalfs / 8 / kV2Threads;
  constexpr int kKvRowsPerPass = kV2Threads / S::kChunks;
  const int kv_row = tid / S::kChunks;
  const int kv_chunk = tid % S::kChunks;
  const size_t head_offset = static_cast<size_t>(kv_head) * kHeadDim + kv_chunk * 8;
  // Block table, two tiles ahead: thread t < kBlockN looks up key t of a tile into a register
  // one iteration before it stores it to the slot ring (slot - key per key), so the lookup's
  // latency hides behind a tile of math and no thread keeps per-pass slots in registers.
  int* slot_smem = reinterpret_cast<int*>(kv_smem + 2 * 2 * S::kKvHalfs);  // [2][kBlockN]
  auto slot_delta_of = [&](int kv_tile) {
    const int key = kv_tile * kBlockN + tid;
    if (tid >= kBlockN || key >= kv_end) return 0;
    const int logical = indexer.pow2 ? key >> indexer.shift : key / indexer.size;
    return (__ldg(block_table + logical) - logical) * indexer.size;
  };
  auto load_kv = [&](int kv_tile, int stage) {
    uint16_t* k_dst = kv_smem + stage * 2 * S::kKvHalfs;
    uint16_t* v_dst = k_dst + S::kKvHalfs;
    const int* slot_delta = slot_smem + stage * kBlockN;
#pragma unroll
    for (int i = 0; i < kKvPasses; ++i) {
      const int row = kv_row + i * kKvRowsPerPass;
      const int key = kv_tile * kBlockN + row;
      const bool valid = key < kv_end;
      const size_t offset = valid ? static_cast<size_t>(key + slot_delta[row]) * token_stride + head_offset : 0;
      const int dst = swizzled<kHeadDim>(row, kv_chunk);
      cp_async_16(k_dst + dst, cache.fp16_keys() + offset, valid);
      cp_async_16(v_dst + dst, cache.fp16_values() + offset, valid);
    }
  };

  if (tid < kBlockN) {
    slot_smem[tid] = slot_delta_of(0);
    slot_smem[kBlockN + tid] = slot_delta_of(1);
  }
  int next_slot = slot_delta_of(2);  // tile j+2's at the top of iteration j
  __syncthreads();
  load_kv(0, 0);
  cp_async_commit();  // group 0: Q and K/V tile 0

  float o[kV2MTiles][kHeadDim / 8][4];
#pragma unroll
  for (int mt = 0; mt < kV2MTiles; ++mt)
#pragma unroll
    for (int nb = 0; nb < kHeadDim / 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][nb][e] = 0.0f;
  float row_max[kV2MTiles][2];
  float row_sum[kV2MTiles][2];
#pragma unroll
  for (int mt = 0; mt < kV2MTiles; ++mt) {
    row_max[mt][0] = row_max[mt][1] = -INFINITY;
    row_sum[mt][0] = row_sum[mt][1] = 0.0f;
  }
  const float score_scale = args.scale * kLog2e;
  const int warp_row0 = warp * kV2WarpRows;
  const int warp_pos0 = pos0 + warp_row0;
  const bool warp_has_rows = m0 + warp_row0 < query_len;

  for (int j = 0; j < num_tiles; ++j) {
    const int stage = j & 1;
    cp_async_wait<0>();
    __syncthreads();  // tile j (and Q) visible to all; every warp is done with tile j-1
    if (j + 1 < num_tiles) load_kv(j + 1, stage ^ 1);
    cp_async_commit();
    // Stage `stage`'s slots (tile j's) were last read before this barrier: refill with j+2's.
    if (tid < kBlockN) slot_smem[stage * kBlockN + tid] = next_slot;
    next_slot = slot_delta_of(j + 3);

    const int key0 = j * kBlockN;
    if (warp_has_rows && key0 <= warp_pos0 + kV2WarpRows - 1) {
      const uint16_t* k_tile = kv_smem + stage * 2 * S::kKvHalfs;
      const uint16_t* v_tile = k_tile + S::kKvHalfs;

      float s[kV2MTiles][kBlockN / 8][4];
#pragma unroll
      for (int mt = 0; mt < kV2MTiles; ++mt)
#pragma unroll
        for (int nb = 0; nb < kBlockN / 8; ++nb)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][nb][e] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < kHeadDim / 16; ++ks) {
        uint32_t qa[kV2MTiles][4];
#pragma unroll
        for (int mt = 0; mt < kV2MTiles; ++mt) {
          ldmatrix_x4(qa[mt], q_smem + swizzled<kHeadDim>(warp_row0 + mt * 16 + lane % 16, ks * 2 + lane / 16));
        }
#pragma unroll
        for (int p = 0; p < kBlockN / 16; ++p) {
          uint32_t b[4];
          ldmatrix_x4(b, k_tile + swizzled<kHeadDim>(16 * p + lane % 8 + (lane / 16) * 8, ks * 2 + (lane / 8) % 2));
#pragma unroll
          for (int mt = 0; mt < kV2MTiles; ++mt) {
            mma_16816(s[mt][2 * p], qa[mt], b[0], b[1]);
            mma_16816(s[mt][2 * p + 1], qa[mt], b[2], b[3]);
          }
        }
      }

      if (key0 + kBlockN - 1 > warp_pos0 || key0 + kBlockN > context_len) {
#pragma unroll
        for (int mt = 0; mt < kV2MTiles; ++mt) {
#pragma unroll
          for (int nb = 0; nb < kBlockN / 8; ++nb) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int key = key0 + nb * 8 + 2 * quad_lane + (e & 1);
              const int position = warp_pos0 + mt * 16 + group_row + (e >= 2 ? 8 : 0);
              if (key > position || key >= context_len) s[mt][nb][e] = -INFINITY;
            }
          }
        }
      }
      float alphas[kV2MTiles][2];
      bool max_moved = false;
#pragma unroll
      for (int mt = 0; mt < kV2MTiles; ++mt) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          float tile_max = -INFINITY;
#pragma unroll
          for (int nb = 0; nb < kBlockN / 8; ++nb) {
            tile_max = fmaxf(tile_max, fmaxf(s[mt][nb][2 * half], s[mt][nb][2 * half + 1]));
          }
          tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
          tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
          // Finite: key 0 is visible to every row in tile 0, and row_max carries it afterwards.
          const float new_max = fmaxf(row_max[mt][half], tile_max);
          const float alpha = exp2_ftz((row_max[mt][half] - new_max) * score_scale);
          row_max[mt][half] = new_max;
          const float neg_max_scaled = -new_max * score_scale;
          float sum = 0.0f;
#pragma unroll
          for (int nb = 0; nb < kBlockN / 8; ++nb) {
            s[mt][nb][2 * half] = exp2_ftz(fmaf(s[mt][nb][2 * half], score_scale, neg_max_scaled));
            s[mt][nb][2 * half + 1] = exp2_ftz(fmaf(s[mt][nb][2 * half + 1], score_scale, neg_max_scaled));
            sum += s[mt][nb][2 * half] + s[mt][nb][2 * half + 1];
          }
          row_sum[mt][half] = row_sum[mt][half] * alpha + sum;
          alphas[mt][half] = alpha;
          max_moved |= alpha != 1.0f;
        }
      }
      // Rescale O only when some row's max moved (x * 1.0f == x, so skipping is exact).
      if (__any_sync(0xffffffffu, max_moved)) {
#pragma unroll
        for (int mt = 0; mt < kV2MTiles; ++mt)
#pragma unroll
          for (int nb = 0; nb < kHeadDim / 8; ++nb) {
            o[mt][nb][0] *= alphas[mt][0];
            o[mt][nb][1] *= alphas[mt][0];
            o[mt][nb][2] *= alphas[mt][1];
            o[mt][nb][3] *= alphas[mt][1];
          }
      }

#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        uint32_t a[kV2MTiles][4];
#pragma unroll
        for (int mt = 0; mt < kV2MTiles; ++mt) {
          a[mt][0] = pack_half2(s[mt][2 * kk][0], s[mt][2 * kk][1]);
          a[mt][1] = pack_half2(s[mt][2 * kk][2], s[mt][2 * kk][3]);
          a[mt][2] = pack_half2(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
          a[mt][3] = pack_half2(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < kHeadDim / 16; ++dp) {
          uint32_t b[4];
          ldmatrix_x4_trans(b,
                            v_tile + swizzled<kHeadDim>(16 * kk + lane % 8 + ((lane / 8) % 2) * 8, dp * 2 + lane / 16));
#pragma unroll
          for (int mt = 0; mt < kV2MTiles; ++mt) {
            mma_16816(o[mt][2 * dp], a[mt], b[0], b[1]);
            mma_16816(o[mt][2 * dp + 1], a[mt], b[2], b[3]);
          }
        }
      }
    }
  }
  cp_async_wait<0>();  // no copy may outlive the CTA's shared memory

#pragma unroll
  for (int mt = 0; mt < kV2MTiles; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float sum = row_sum[mt][half];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = 1.0f / sum;
      const int row = warp_row0 + mt * 16 + group_row + half * 8;
      if (m0 + row >= query_len) continue;
      uint16_t* dst = args.out + (static_cast<size_t>(query_start + m0 + row) * args.num_heads + head) * kHeadDim;
#pragma unroll
      for (int nb = 0; nb < kHeadDim / 8; ++nb) {
        *reinterpret_cast<uint32_t*>(dst + nb * 8 + 2 * quad_lane) =
            pack_bf162(o[mt][nb][2 * half] * inv, o[mt][nb][2 * half + 1] * inv);
      }
    }
  }
}

// --- PrefillKernel::kRows128v3 --------------------------------------------------------------
//
// kRows128v2 reworked for register pressure and for softmax / tensor-core overlap. Same CTA
// shape (4 warps x 32 rows), same 64-key K/V tiles, 2-stage ring, one barrier per tile, slot
// staging and heaviest-first grid. Per tile, each warp works in two 32-key halves: S is
// 2 x 32 fp32 registers instead of v2's 2 x 64 (v2: 255 registers and 124 B of spills at
// head_dim 128; v3: 4 B), every K/V fragment still feeds 4 mma.sync, Q fragments are
// reloaded per half. Order per tile: S0 = Q K0^T, softmax(S0), S1 = Q K1^T, then P0 V and
// softmax(S1) in one basic block (independent, so ptxas interleaves the exp2 / max / pack
// work of half 1 with the mma.sync of half 0), then P1 V. P is packed to fp16 right after its
// exp2. Fragment addresses are a per-lane offset XORed with a compile-time constant per
// k-step (the swizzle folded in), not recomputed from pointers. Masking only on the diagonal
// / context-edge tiles (uniform branch).
// Numerics: online softmax over 32-key steps from key 0 (raw-score max, one FMA, then
// ex2.approx.ftz), so a row's bits depend only on its own position, query_len and
// context_len: batch invariance holds. (A warp skips a 64-key tile wholly after its rows; a
// half wholly after its rows is computed fully masked, which leaves the rows' state
// unchanged.) The bits differ from v2's (other softmax step), not the accuracy.
constexpr int kV3SubN = 32;

// ldmatrix from a precomputed shared-memory address (the kernel folds the swizzle into a
// per-lane base plus compile-time offsets instead of recomputing it from pointers).
__device__ __forceinline__ void ldmatrix_x4_addr(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ __forceinline__ void ldmatrix_x4_trans_addr(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

template <int kHeadDim>
__global__ void __launch_bounds__(kV2Threads, 2)
    prefill_v3_kernel(const PagedAttentionArgs args, bool skip_single_query) {
  using S = V2PrefillShape<kHeadDim>;
  extern __shared__ __align__(128) unsigned char smem[];
  uint16_t* q_smem = reinterpret_cast<uint16_t*>(smem);
  uint16_t* kv_smem = q_smem + S::kQHalfs;  // [stage][K|V][kBlockN][kHeadDim], swizzled

  const int head = blockIdx.x;
  const int seq = blockIdx.y;
  const int tile = gridDim.z - 1 - blockIdx.z;
  const int query_start = args.cu_query_starts[seq];
  const int query_len = args.cu_query_starts[seq + 1] - query_start;
  const int m0 = tile * kV2BlockM;
  if (m0 >= query_len || (skip_single_query && query_len == 1)) return;

  const KvLayerView& cache = args.cache;
  const int context_len = args.context_lens[seq];
  const int pos0 = context_len - query_len + m0;
  const int kv_head = head / (args.num_heads / cache.num_kv_heads);
  const int kv_end = min(context_len, pos0 + kV2BlockM);
  const int num_tiles = (kv_end + kBlockN - 1) / kBlockN;
  const int32_t* block_table = args.block_tables + static_cast<size_t>(seq) * args.max_blocks_per_seq;
  const BlockIndexer indexer(cache.block_size);

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int group_row = lane / 4;
  const int quad_lane = lane % 4;

#pragma unroll
  for (int i = 0; i < S::kQHalfs / 8 / kV2Threads; ++i) {
    const int c = tid + i * kV2Threads;
    const int row = c / S::kChunks;
    const int chunk = c % S::kChunks;
    const bool valid = m0 + row < query_len;
    const uint16_t* src = args.q;
    if (valid) {
      src += (static_cast<size_t>(query_start + m0 + row) * args.num_heads + head) * kHeadDim + chunk * 8;
    }
    cp_async_16(q_smem + swizzled<kHeadDim>(row, chunk), src, valid);
  }

  constexpr int kKvPasses = S::kKvHalfs / 8 / kV2Threads;
  constexpr int kKvRowsPerPass = kV2Threads / S::kChunks;
  const int kv_row = tid / S::kChunks;
  const int kv_chunk = tid % S::kChunks;
  int* slot_smem = reinterpret_cast<int*>(kv_smem + 2 * 2 * S::kKvHalfs);  // [2][kBlockN]
  auto slot_delta_of = [&](int kv_tile) {
    const int key = kv_tile * kBlockN + tid;
    if (tid >= kBlockN || key >= kv_end) return 0;
    const int logical = indexer.pow2 ? key >> indexer.shift : key / indexer.size;
    return (__ldg(block_table + logical) - logical) * indexer.size;
  };
  // Copy of one K/V tile. Everything but the row's slot is recomputed from kernel arguments
  // (cheap integer math once per tile) instead of being kept live across the loop.
  auto load_kv = [&](int kv_tile, int stage) {
    const size_t token_stride = static_cast<size_t>(args.cache.num_kv_heads) * kHeadDim;
    const size_t head_offset = static_cast<size_t>(kv_head) * kHeadDim + kv_chunk * 8;
    uint16_t* k_dst = kv_smem + stage * 2 * S::kKvHalfs;
    uint16_t* v_dst = k_dst + S::kKvHalfs;
    const int* slot_delta = slot_smem + stage * kBlockN;
#pragma unroll
    for (int i = 0; i < kKvPasses; ++i) {
      const int row = kv_row + i * kKvRowsPerPass;
      const int key = kv_tile * kBlockN + row;
      const bool valid = key < kv_end;
      const size_t offset = valid ? static_cast<size_t>(key + slot_delta[row]) * token_stride + head_offset : 0;
      const int dst = swizzled<kHeadDim>(row, kv_chunk);
      cp_async_16(k_dst + dst, args.cache.fp16_keys() + offset, valid);
      cp_async_16(v_dst + dst, args.cache.fp16_values() + offset, valid);
    }
  };

  if (tid < kBlockN) {
    slot_smem[tid] = slot_delta_of(0);
    slot_smem[kBlockN + tid] = slot_delta_of(1);
  }
  int next_slot = slot_delta_of(2);  // tile j+2's at the top of iteration j
  __syncthreads();
  load_kv(0, 0);
  cp_async_commit();  // group 0: Q and K/V tile 0

  float o[kV2MTiles][kHeadDim / 8][4];
#pragma unroll
  for (int mt = 0; mt < kV2MTiles; ++mt)
#pragma unroll
    for (int nb = 0; nb < kHeadDim / 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][nb][e] = 0.0f;
  float row_max[kV2MTiles][2];
  float row_sum[kV2MTiles][2];
#pragma unroll
  for (int mt = 0; mt < kV2MTiles; ++mt) {
    row_max[mt][0] = row_max[mt][1] = -INFINITY;
    row_sum[mt][0] = row_sum[mt][1] = 0.0f;
  }
  const float score_scale = args.scale * kLog2e;
  const int warp_row0 = warp * kV2WarpRows;
  const int warp_pos0 = pos0 + warp_row0;
  // Keys this warp can see: < min(context_len, its last row's position + 1); 0 if no rows.
  const int warp_key_end = m0 + warp_row0 < query_len ? min(context_len, warp_pos0 + kV2WarpRows) : 0;
  // Per-lane shared-memory byte offsets of the fragments (swizzle folded in; ks / p / kk / dp
  // are compile-time and (row & 7) is the same for every row a lane touches in one ldmatrix).
  // Chunk 2 * step + c of row r sits at byte 16 * ((2 * step + c) ^ (r & 7)) of its row, which is
  // (16 * (c ^ (r & 7))) ^ (32 * step): one per-lane offset per operand, XORed with a
  // compile-time constant per k-step (the row term lies above bit 7, the XOR cannot reach it).
  const uint32_t q_base = smem_address(q_smem);
  const uint32_t q_lane = 2u * static_cast<uint32_t>((warp_row0 + lane % 16) * kHeadDim) +
                          16u * static_cast<uint32_t>((lane / 16) ^ (lane % 8));
  const uint32_t k_lane = 2u * static_cast<uint32_t>((lane % 8 + (lane / 16) * 8) * kHeadDim) +
                          16u * static_cast<uint32_t>(((lane / 8) % 2) ^ (lane % 8));
  const uint32_t v_lane = 2u * static_cast<uint32_t>((lane % 8 + ((lane / 8) % 2) * 8) * kHeadDim) +
                          16u * static_cast<uint32_t>((lane / 16) ^ (lane % 8));

  for (int j = 0; j < num_tiles; ++j) {
    const int stage = j & 1;
    cp_async_wait<0>();
    __syncthreads();  // tile j (and Q) visible to all; every warp is done with tile j-1
    if (j + 1 < num_tiles) load_kv(j + 1, stage ^ 1);
    cp_async_commit();
    // Stage `stage`'s slots (tile j's) were last read before this barrier: refill with j+2's.
    if (tid < kBlockN) slot_smem[stage * kBlockN + tid] = next_slot;
    next_slot = slot_delta_of(j + 3);

    const uint32_t k_base = smem_address(kv_smem) + 2u * static_cast<uint32_t>(stage * 2 * S::kKvHalfs);
    const uint32_t v_base = k_base + 2u * S::kKvHalfs;
    const int key0 = j * kBlockN;
    if (key0 >= warp_key_end) continue;  // wholly after the warp's rows (or no rows)
    auto qk = [&](float(&s)[kV2MTiles][kV3SubN / 8][4], uint32_t k_sub) {
#pragma unroll
      for (int mt = 0; mt < kV2MTiles; ++mt)
#pragma unroll
        for (int nb = 0; nb < kV3SubN / 8; ++nb)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][nb][e] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < kHeadDim / 16; ++ks) {
        uint32_t qa[kV2MTiles][4];
#pragma unroll
        for (int mt = 0; mt < kV2MTiles; ++mt) {
          ldmatrix_x4_addr(qa[mt], q_base + 2u * (mt * 16 * kHeadDim) + (q_lane ^ (32u * ks)));
        }
#pragma unroll
        for (int p = 0; p < kV3SubN / 16; ++p) {
          uint32_t b[4];
          ldmatrix_x4_addr(b, k_sub + 2u * (16 * p * kHeadDim) + (k_lane ^ (32u * ks)));
#pragma unroll
          for (int mt = 0; mt < kV2MTiles; ++mt) {
            mma_16816(s[mt][2 * p], qa[mt], b[0], b[1]);
            mma_16816(s[mt][2 * p + 1], qa[mt], b[2], b[3]);
          }
        }
      }
    };
    auto mask = [&](float(&s)[kV2MTiles][kV3SubN / 8][4], int sub_key0) {
#pragma unroll
      for (int mt = 0; mt < kV2MTiles; ++mt)
#pragma unroll
        for (int nb = 0; nb < kV3SubN / 8; ++nb)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = sub_key0 + nb * 8 + 2 * quad_lane + (e & 1);
            const int position = warp_pos0 + mt * 16 + group_row + (e >= 2 ? 8 : 0);
            if (key > position || key >= context_len) s[mt][nb][e] = -INFINITY;
          }
    };
    // Online-softmax update of the running max / sum; P (fp16 A fragments) into pa, the O
    // factors into alphas; returns whether any row of the warp moved its max.
    auto softmax = [&](float(&s)[kV2MTiles][kV3SubN / 8][4], uint32_t(&pa)[kV2MTiles][kV3SubN / 16][4],
                       float(&alphas)[kV2MTiles][2]) {
      bool max_moved = false;
#pragma unroll
      for (int mt = 0; mt < kV2MTiles; ++mt) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          float tile_max = -INFINITY;
#pragma unroll
          for (int nb = 0; nb < kV3SubN / 8; ++nb) {
            tile_max = fmaxf(tile_max, fmaxf(s[mt][nb][2 * half], s[mt][nb][2 * half + 1]));
          }
          tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
          tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
          // Finite: key 0 is visible to every row in half 0 of tile 0, and row_max carries it.
          const float new_max = fmaxf(row_max[mt][half], tile_max);
          const float alpha = exp2_ftz((row_max[mt][half] - new_max) * score_scale);
          row_max[mt][half] = new_max;
          const float neg_max_scaled = -new_max * score_scale;
          float sum = 0.0f;
#pragma unroll
          for (int nb = 0; nb < kV3SubN / 8; ++nb) {
            const float p0 = exp2_ftz(fmaf(s[mt][nb][2 * half], score_scale, neg_max_scaled));
            const float p1 = exp2_ftz(fmaf(s[mt][nb][2 * half + 1], score_scale, neg_max_scaled));
            sum += p0 + p1;
            // A fragment of k-step nb / 2: {row lo k0-7, row hi k0-7, row lo k8-15, row hi k8-15}.
            pa[mt][nb / 2][(nb % 2) * 2 + half] = pack_half2(p0, p1);
          }
          row_sum[mt][half] = row_sum[mt][half] * alpha + sum;
          alphas[mt][half] = alpha;
          max_moved |= alpha != 1.0f;
        }
      }
      return __any_sync(0xffffffffu, max_moved);
    };
    // Rescale O only when some row's max moved (x * 1.0f == x, so skipping is exact).
    auto rescale = [&](const float(&alphas)[kV2MTiles][2]) {
#pragma unroll
      for (int mt = 0; mt < kV2MTiles; ++mt)
#pragma unroll
        for (int nb = 0; nb < kHeadDim / 8; ++nb) {
          o[mt][nb][0] *= alphas[mt][0];
          o[mt][nb][1] *= alphas[mt][0];
          o[mt][nb][2] *= alphas[mt][1];
          o[mt][nb][3] *= alphas[mt][1];
        }
    };
    auto pv = [&](const uint32_t(&pa)[kV2MTiles][kV3SubN / 16][4], uint32_t v_sub) {
#pragma unroll
      for (int kk = 0; kk < kV3SubN / 16; ++kk) {
#pragma unroll
        for (int dp = 0; dp < kHeadDim / 16; ++dp) {
          uint32_t b[4];
          ldmatrix_x4_trans_addr(b, v_sub + 2u * (16 * kk * kHeadDim) + (v_lane ^ (32u * dp)));
#pragma unroll
          for (int mt = 0; mt < kV2MTiles; ++mt) {
            mma_16816(o[mt][2 * dp], pa[mt][kk], b[0], b[1]);
            mma_16816(o[mt][2 * dp + 1], pa[mt][kk], b[2], b[3]);
          }
        }
      }
    };
    constexpr uint32_t kSubBytes = 2u * kV3SubN * kHeadDim;
    // Masking only on the diagonal / context-edge tiles (a uniform branch; it ends no basic
    // block that the overlap needs: S1's mask sits between QK1 and P0 V).
    const bool masked = key0 + kBlockN - 1 > warp_pos0 || key0 + kBlockN > context_len;
    float s0[kV2MTiles][kV3SubN / 8][4], s1[kV2MTiles][kV3SubN / 8][4];
    uint32_t pa0[kV2MTiles][kV3SubN / 16][4], pa1[kV2MTiles][kV3SubN / 16][4];
    float alphas0[kV2MTiles][2], alphas1[kV2MTiles][2];
    qk(s0, k_base);
    if (masked) mask(s0, key0);
    if (softmax(s0, pa0, alphas0)) rescale(alphas0);
    qk(s1, k_base + kSubBytes);
    if (masked) mask(s1, key0 + kV3SubN);
    pv(pa0, v_base);  // same basic block as the softmax of S1: ptxas interleaves them
    if (softmax(s1, pa1, alphas1)) rescale(alphas1);
    pv(pa1, v_base + kSubBytes);
  }
  cp_async_wait<0>();  // no copy may outlive the CTA's shared memory

#pragma unroll
  for (int mt = 0; mt < kV2MTiles; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float sum = row_sum[mt][half];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = 1.0f / sum;
      const int row = warp_row0 + mt * 16 + group_row + half * 8;
      if (m0 + row >= query_len) continue;
      uint16_t* dst = args.out + (static_cast<size_t>(query_start + m0 + row) * args.num_heads + head) * kHeadDim;
#pragma unroll
      for (int nb = 0; nb < kHeadDim / 8; ++nb) {
        *reinterpret_cast<uint32_t*>(dst + nb * 8 + 2 * quad_lane) =
            pack_bf162(o[mt][nb][2 * half] * inv, o[mt][nb][2 * half + 1] * inv);
      }
    }
  }
}

template <int kHeadDim>
void launch_prefill_v3(const PagedAttentionArgs& args, bool skip_single_query, Stream stream) {
  using S = V2PrefillShape<kHeadDim>;
  static const bool attribute_set = [] {
    cudaFuncSetAttribute(prefill_v3_kernel<kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(S::kSmemBytes));
    return true;
  }();
  (void)attribute_set;
  const dim3 grid(args.num_heads, args.num_seqs, (args.max_query_len + kV2BlockM - 1) / kV2BlockM);
  prefill_v3_kernel<kHeadDim><<<grid, kV2Threads, S::kSmemBytes, stream>>>(args, skip_single_query);
}

template <int kHeadDim>
void launch_prefill_v2(const PagedAttentionArgs& args, bool skip_single_query, Stream stream) {
  using S = V2PrefillShape<kHeadDim>;
  static const bool attribute_set = [] {
    cudaFuncSetAttribute(prefill_v2_kernel<kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(S::kSmemBytes));
    return true;
  }();
  (void)attribute_set;
  const dim3 grid(args.num_heads, args.num_seqs, (args.max_query_len + kV2BlockM - 1) / kV2BlockM);
  prefill_v2_kernel<kHeadDim><<<grid, kV2Threads, S::kSmemBytes, stream>>>(args, skip_single_query);
}

template <int kHeadDim>
void launch_prefill_wide(const PagedAttentionArgs& args, bool skip_single_query, Stream stream) {
  using S = WidePrefillShape<kHeadDim>;
  static const bool attribute_set = [] {
    cudaFuncSetAttribute(prefill_wide_kernel<kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(S::kSmemBytes));
    return true;
  }();
  (void)attribute_set;
  const dim3 grid((args.max_query_len + kWideBlockM - 1) / kWideBlockM, args.num_heads, args.num_seqs);
  prefill_wide_kernel<kHeadDim><<<grid, kWideThreads, S::kSmemBytes, stream>>>(args, skip_single_query);
}

}  // namespace

void paged_attention_prefill(const PagedAttentionArgs& args, Stream stream, PrefillRows rows, PrefillKernel kernel) {
  assert(args.cache.head_dim == 64 || args.cache.head_dim == 128);
  assert(args.num_heads % args.cache.num_kv_heads == 0);
  if (args.num_seqs == 0 || args.max_query_len <= 0) return;
  const bool skip_single_query = rows == PrefillRows::kMultiTokenOnly;
  // Every quantized format dequantizes its tiles in the 64-row kernel.
  if (args.cache.format != KvFormat::kFp16) return prefill::launch_prefill_rows64(args, skip_single_query, stream);
  if (kernel == PrefillKernel::kRows128v3) {
    if (args.cache.head_dim == 64) {
      launch_prefill_v3<64>(args, skip_single_query, stream);
    } else {
      launch_prefill_v3<128>(args, skip_single_query, stream);
    }
    return;
  }
  if (kernel == PrefillKernel::kRows128v2) {
    if (args.cache.head_dim == 64) {
      launch_prefill_v2<64>(args, skip_single_query, stream);
    } else {
      launch_prefill_v2<128>(args, skip_single_query, stream);
    }
    return;
  }
  if (kernel == PrefillKernel::kRows128) {
    if (args.cache.head_dim == 64) {
      launch_prefill_wide<64>(args, skip_single_query, stream);
    } else {
      launch_prefill_wide<128>(args, skip_single_query, stream);
    }
    return;
  }
  prefill::launch_prefill_rows64(args, skip_single_query, stream);
}

}  // namespace folio::cuda
