// Varlen paged prefill attention on tensor cores, PrefillKernel::kRows128 (the default for
// fp16 caches): 128 query rows per CTA. The algorithm is the 64-row kernel's
// (attention_prefill_rows64.cu describes it); what this one adds is register blocking and
// overlap.
//
// FA2's register blocking: 4 warps x 32 query rows (two m16 tiles per warp). Every K / V
// fragment a warp loads with ldmatrix feeds 4 mma.sync instead of 2, halving the shared-memory
// traffic per FLOP. A 2-stage K/V ring (96 KB with Q at head_dim 128) so that two CTAs share an
// SM: their barriers are independent, so one CTA's softmax overlaps the other's mma.sync. One
// barrier per tile: at the top of iteration j it proves tile j landed and every warp is done
// with tile j-1, whose stage then receives tile j+1. The grid is (heads, seqs, query tiles) with
// the tile index reversed, so all of the heaviest causal tiles launch first (longest processing
// time first across the whole grid).
//
// Per 64-key tile, each warp works in two 32-key halves: S is 2 x 32 fp32 registers (a whole
// tile's 2 x 64 spilled at head_dim 128), Q fragments are reloaded per half. Order per tile:
// S0 = Q K0^T, softmax(S0), S1 = Q K1^T, then P0 V and softmax(S1) in one basic block
// (independent, so ptxas interleaves the exp2 / max / pack work of half 1 with the mma.sync of
// half 0), then P1 V. P is packed to fp16 right after its exp2. Fragment addresses are a
// per-lane offset XORed with a compile-time constant per k-step (the swizzle folded in).
// Masking only on the diagonal / context-edge tiles (uniform branch).
// Numerics: online softmax over 32-key steps from key 0 (raw-score max, one FMA, then
// ex2.approx.ftz), so a row's bits depend only on its own position, query_len and context_len:
// batch invariance holds. (A warp skips a 64-key tile wholly after its rows; a half wholly after
// its rows is computed fully masked, which leaves the rows' state unchanged.)
//
// Two earlier 128-row variants (8 warps x 16 rows on a 3-stage ring; 4 x 32 rows with whole-tile
// S) are in git history; their figures are in docs/BENCHMARKS.md (issue 5).
#include <cassert>
#include <cmath>

#include "backend/cuda/kernels/attention_prefill_common.cuh"
#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/kernels/kernels.h"

namespace folio::cuda::prefill {
namespace {

using namespace detail;

constexpr int kBlockM = 128;
constexpr int kThreads = 128;
constexpr int kWarpRows = 32;
constexpr int kMTiles = kWarpRows / 16;

template <int kHeadDim>
struct Rows128Shape {
  static constexpr int kChunks = kHeadDim / 8;
  static constexpr int kQHalfs = kBlockM * kHeadDim;
  static constexpr int kKvHalfs = kBlockN * kHeadDim;
  static constexpr size_t kSmemBytes = (kQHalfs + 2ull * 2 * kKvHalfs) * sizeof(uint16_t) + 2 * kBlockN * sizeof(int);
};

constexpr int kSubN = 32;

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
__global__ void __launch_bounds__(kThreads, 2)
    prefill_rows128_kernel(const PagedAttentionArgs args, bool skip_single_query) {
  using S = Rows128Shape<kHeadDim>;
  extern __shared__ __align__(128) unsigned char smem[];
  uint16_t* q_smem = reinterpret_cast<uint16_t*>(smem);
  uint16_t* kv_smem = q_smem + S::kQHalfs;  // [stage][K|V][kBlockN][kHeadDim], swizzled

  const int head = blockIdx.x;
  const int seq = blockIdx.y;
  const int tile = gridDim.z - 1 - blockIdx.z;
  const int query_start = args.cu_query_starts[seq];
  const int query_len = args.cu_query_starts[seq + 1] - query_start;
  const int m0 = tile * kBlockM;
  if (m0 >= query_len || (skip_single_query && query_len == 1)) return;

  const KvLayerView& cache = args.cache;
  const int context_len = args.context_lens[seq];
  const int pos0 = context_len - query_len + m0;
  const int kv_head = head / (args.num_heads / cache.num_kv_heads);
  const int kv_end = min(context_len, pos0 + kBlockM);
  const int num_tiles = (kv_end + kBlockN - 1) / kBlockN;
  const int32_t* block_table = args.block_tables + static_cast<size_t>(seq) * args.max_blocks_per_seq;
  const BlockIndexer indexer(cache.block_size);

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int group_row = lane / 4;
  const int quad_lane = lane % 4;

#pragma unroll
  for (int i = 0; i < S::kQHalfs / 8 / kThreads; ++i) {
    const int c = tid + i * kThreads;
    const int row = c / S::kChunks;
    const int chunk = c % S::kChunks;
    const bool valid = m0 + row < query_len;
    const uint16_t* src = args.q;
    if (valid) {
      src += (static_cast<size_t>(query_start + m0 + row) * args.num_heads + head) * kHeadDim + chunk * 8;
    }
    cp_async_16(q_smem + swizzled<kHeadDim>(row, chunk), src, valid);
  }

  constexpr int kKvPasses = S::kKvHalfs / 8 / kThreads;
  constexpr int kKvRowsPerPass = kThreads / S::kChunks;
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

  float o[kMTiles][kHeadDim / 8][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int nb = 0; nb < kHeadDim / 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][nb][e] = 0.0f;
  float row_max[kMTiles][2];
  float row_sum[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    row_max[mt][0] = row_max[mt][1] = -INFINITY;
    row_sum[mt][0] = row_sum[mt][1] = 0.0f;
  }
  const float score_scale = args.scale * kLog2e;
  const int warp_row0 = warp * kWarpRows;
  const int warp_pos0 = pos0 + warp_row0;
  // Keys this warp can see: < min(context_len, its last row's position + 1); 0 if no rows.
  const int warp_key_end = m0 + warp_row0 < query_len ? min(context_len, warp_pos0 + kWarpRows) : 0;
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
    auto qk = [&](float(&s)[kMTiles][kSubN / 8][4], uint32_t k_sub) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int nb = 0; nb < kSubN / 8; ++nb)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][nb][e] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < kHeadDim / 16; ++ks) {
        uint32_t qa[kMTiles][4];
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          ldmatrix_x4_addr(qa[mt], q_base + 2u * (mt * 16 * kHeadDim) + (q_lane ^ (32u * ks)));
        }
#pragma unroll
        for (int p = 0; p < kSubN / 16; ++p) {
          uint32_t b[4];
          ldmatrix_x4_addr(b, k_sub + 2u * (16 * p * kHeadDim) + (k_lane ^ (32u * ks)));
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            mma_16816(s[mt][2 * p], qa[mt], b[0], b[1]);
            mma_16816(s[mt][2 * p + 1], qa[mt], b[2], b[3]);
          }
        }
      }
    };
    auto mask = [&](float(&s)[kMTiles][kSubN / 8][4], int sub_key0) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int nb = 0; nb < kSubN / 8; ++nb)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = sub_key0 + nb * 8 + 2 * quad_lane + (e & 1);
            const int position = warp_pos0 + mt * 16 + group_row + (e >= 2 ? 8 : 0);
            if (key > position || key >= context_len) s[mt][nb][e] = -INFINITY;
          }
    };
    // Online-softmax update of the running max / sum; P (fp16 A fragments) into pa, the O
    // factors into alphas; returns whether any row of the warp moved its max.
    auto softmax = [&](float(&s)[kMTiles][kSubN / 8][4], uint32_t(&pa)[kMTiles][kSubN / 16][4],
                       float(&alphas)[kMTiles][2]) {
      bool max_moved = false;
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          float tile_max = -INFINITY;
#pragma unroll
          for (int nb = 0; nb < kSubN / 8; ++nb) {
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
          for (int nb = 0; nb < kSubN / 8; ++nb) {
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
    auto rescale = [&](const float(&alphas)[kMTiles][2]) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int nb = 0; nb < kHeadDim / 8; ++nb) {
          o[mt][nb][0] *= alphas[mt][0];
          o[mt][nb][1] *= alphas[mt][0];
          o[mt][nb][2] *= alphas[mt][1];
          o[mt][nb][3] *= alphas[mt][1];
        }
    };
    auto pv = [&](const uint32_t(&pa)[kMTiles][kSubN / 16][4], uint32_t v_sub) {
#pragma unroll
      for (int kk = 0; kk < kSubN / 16; ++kk) {
#pragma unroll
        for (int dp = 0; dp < kHeadDim / 16; ++dp) {
          uint32_t b[4];
          ldmatrix_x4_trans_addr(b, v_sub + 2u * (16 * kk * kHeadDim) + (v_lane ^ (32u * dp)));
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            mma_16816(o[mt][2 * dp], pa[mt][kk], b[0], b[1]);
            mma_16816(o[mt][2 * dp + 1], pa[mt][kk], b[2], b[3]);
          }
        }
      }
    };
    constexpr uint32_t kSubBytes = 2u * kSubN * kHeadDim;
    // Masking only on the diagonal / context-edge tiles (a uniform branch; it ends no basic
    // block that the overlap needs: S1's mask sits between QK1 and P0 V).
    const bool masked = key0 + kBlockN - 1 > warp_pos0 || key0 + kBlockN > context_len;
    float s0[kMTiles][kSubN / 8][4], s1[kMTiles][kSubN / 8][4];
    uint32_t pa0[kMTiles][kSubN / 16][4], pa1[kMTiles][kSubN / 16][4];
    float alphas0[kMTiles][2], alphas1[kMTiles][2];
    qk(s0, k_base);
    if (masked) mask(s0, key0);
    if (softmax(s0, pa0, alphas0)) rescale(alphas0);
    qk(s1, k_base + kSubBytes);
    if (masked) mask(s1, key0 + kSubN);
    pv(pa0, v_base);  // same basic block as the softmax of S1: ptxas interleaves them
    if (softmax(s1, pa1, alphas1)) rescale(alphas1);
    pv(pa1, v_base + kSubBytes);
  }
  cp_async_wait<0>();  // no copy may outlive the CTA's shared memory

#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
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
void launch_for_dim(const PagedAttentionArgs& args, bool skip_single_query, Stream stream) {
  using S = Rows128Shape<kHeadDim>;
  static const bool attribute_set = [] {
    cudaFuncSetAttribute(prefill_rows128_kernel<kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(S::kSmemBytes));
    return true;
  }();
  (void)attribute_set;
  const dim3 grid(args.num_heads, args.num_seqs, (args.max_query_len + kBlockM - 1) / kBlockM);
  prefill_rows128_kernel<kHeadDim><<<grid, kThreads, S::kSmemBytes, stream>>>(args, skip_single_query);
}

}  // namespace

void launch_prefill_rows128(const PagedAttentionArgs& args, bool skip_single_query, Stream stream) {
  if (args.cache.head_dim == 64) {
    launch_for_dim<64>(args, skip_single_query, stream);
  } else {
    launch_for_dim<128>(args, skip_single_query, stream);
  }
}

}  // namespace folio::cuda::prefill
