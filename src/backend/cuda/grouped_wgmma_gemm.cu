#include "backend/cuda/grouped_wgmma_gemm.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cassert>
#include <climits>

#include "backend/cuda/grouped_codes.cuh"
#include "backend/cuda/wgmma.cuh"

namespace folio::cuda {
namespace {

constexpr int kThreads = 256;  // two warpgroups
constexpr int kBlockRows = 128;
constexpr int kTokens = 128;
constexpr int kChunk = 64;                          // k columns a stage holds: 128 bytes a token
constexpr int kStageBytes = kTokens * kChunk * 2;   // 16 KB
constexpr int kSmemBytes = 2 * kStageBytes + 1024;  // two stages, + slack for 1,024-byte alignment
constexpr int kMaxSplits = 8;
constexpr int kTileFloats = kBlockRows * kTokens;

#if FOLIO_WGMMA
constexpr int kPieces = kStageBytes / 16 / kThreads;  // 16-byte pieces of a stage a thread moves
constexpr int kPrefetch = 4;                          // weight chunks in flight a thread (registers)

// Row-major activations (x) to the stage layout. A 16-byte piece q of a token's 64 columns
// holds columns 8q..8q+7, which the small kernel's register layout (grouped_small_gemm.cuh)
// gives to thread t = q / 2 as MMA steps s = 2 (q % 2) and s + 1, k slots 2t, 2t + 1 (its
// first and third words) and 2t + 8, 2t + 9 (second and fourth). Step s is bytes 32s..32s+31
// of the row, slot j at byte 2j: word w of the piece goes to byte 64 (q % 2) + 16 w + 4 t.
__device__ __forceinline__ uint32_t piece_word_byte(int q, int w) {
  return 64 * (q % 2) + 16 * w + 4 * (q / 2);
}
#endif

template <class Codes>
__global__ void __launch_bounds__(kThreads, 1)
    grouped_wgmma_kernel(const uint16_t* __restrict__ x, const uint8_t* __restrict__ codes,
                         const uint32_t* __restrict__ groups, float* __restrict__ y, int n, int64_t m, int64_t k,
                         int group_shift, float beta, float* __restrict__ partials, int* __restrict__ counters) {
#if FOLIO_WGMMA
  using Chunk = typename Codes::Chunk;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw_addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw_addr + 1023u) & ~1023u;
  uint8_t* const smem = smem_raw + (base - raw_addr);
  __shared__ int last_block;

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, wg = warp / 4;
  const int g = lane / 4, t = lane % 4;
  const int splits = static_cast<int>(gridDim.z), split = static_cast<int>(blockIdx.z);
  const int64_t token0 = static_cast<int64_t>(blockIdx.y) * kTokens;
  const int64_t wg_row0 = static_cast<int64_t>(blockIdx.x) * kBlockRows + 64 * wg;
  const bool active = wg_row0 < m;                    // m % 128 == 64: the last block's second warpgroup idles
  const int64_t row = wg_row0 + 16 * (warp % 4) + g;  // this thread's rows: row and row + 8
  const int64_t chunks = k / kChunk;
  const int64_t begin = chunks * split / splits, end = chunks * (split + 1) / splits;
  const int64_t row_bytes = chunks * Codes::kChunkBytes, row_groups = k >> group_shift;
  const uint8_t* const w_lo = codes + (active ? row : 0) * row_bytes + Codes::kChunkBytes / 4 * t;
  const uint8_t* const w_hi = w_lo + 8 * row_bytes;
  const uint32_t* const g_lo = groups + (active ? row : 0) * row_groups;
  const uint32_t* const g_hi = g_lo + 8 * row_groups;

  // Activations: thread tid moves piece q = tid % 8 of tokens tid / 8 + 32 r.
  const int q = tid % 8;
  auto load_x = [&](int64_t c, uint4(&v)[kPieces]) {
#pragma unroll
    for (int r = 0; r < kPieces; ++r) {
      const int64_t token = token0 + tid / 8 + 32 * r;
      v[r] = token < n ? __ldg(reinterpret_cast<const uint4*>(x + token * k + c * kChunk + 8 * q))
                       : make_uint4(0, 0, 0, 0);
    }
  };
  auto store_x = [&](int stage, const uint4(&v)[kPieces]) {
#pragma unroll
    for (int r = 0; r < kPieces; ++r) {
      const uint32_t token = tid / 8 + 32 * r;
      const uint32_t words[4] = {v[r].x, v[r].y, v[r].z, v[r].w};
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        *reinterpret_cast<uint32_t*>(smem + stage * kStageBytes +
                                     wgmma::swizzled_offset(token, piece_word_byte(q, w))) = words[w];
      }
    }
  };

  Chunk lo[kPrefetch], hi[kPrefetch];
  auto load_w = [&](int slot, int64_t c) {
    lo[slot] = Codes::load(w_lo + c * Codes::kChunkBytes);
    hi[slot] = Codes::load(w_hi + c * Codes::kChunkBytes);
  };
  uint32_t a[2][2][2][4];  // (buffer, i, h) -> a0..a3 of MMA step 2i + h
  auto dequantize = [&](int64_t c, int slot, uint32_t(&out)[2][2][4]) {
    const int64_t group = (c * kChunk + 16 * t) >> group_shift;
    Codes::dequantize(lo[slot], hi[slot], __ldg(g_lo + group), __ldg(g_hi + group), out);
  };

  if (active) {
#pragma unroll
    for (int u = 0; u < kPrefetch; ++u) {
      if (begin + u < end) load_w(u, begin + u);
    }
  }
  {
    uint4 v[kPieces];
    load_x(begin, v);
    store_x(0, v);
  }
  if (active) {
    dequantize(begin, 0, a[0]);
    if (begin + kPrefetch < end) load_w(0, begin + kPrefetch);
  }
  wgmma::fence_async_shared();
  __syncthreads();

  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  // Chunk begin + j: weights in ring slot j % kPrefetch, activations in stage j % 2, operands
  // in a[j % 2]. While chunk c's MMAs run, chunk c + 1 is dequantized and its activations stored.
  for (int64_t c0 = begin; c0 < end; c0 += kPrefetch) {
#pragma unroll
    for (int u = 0; u < kPrefetch; ++u) {
      const int64_t c = c0 + u;
      if (c >= end) break;
      const int stage = u % 2;
      const bool more = c + 1 < end;
      uint4 v[kPieces];
      if (more) load_x(c + 1, v);
      if (active) {
        wgmma::fence();
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          const uint32_t(&op)[4] = a[u % 2][s / 2][s % 2];
          wgmma::mma_m64n128k16(acc, op[0], op[1], op[2], op[3],
                                wgmma::descriptor(base + stage * kStageBytes + 32 * s));
        }
        wgmma::commit();
        if (more) {
          const int slot = (u + 1) % kPrefetch;
          dequantize(c + 1, slot, a[(u + 1) % 2]);
          if (c + 1 + kPrefetch < end) load_w(slot, c + 1 + kPrefetch);
        }
      }
      if (more) {
        store_x(stage ^ 1, v);
        wgmma::fence_async_shared();
      }
      if (active) {
        wgmma::wait<0>();
#pragma unroll
        for (int s = 0; s < 4; ++s) {
#pragma unroll
          for (int e = 0; e < 4; ++e) wgmma::pin(a[u % 2][s / 2][s % 2][e]);
        }
#pragma unroll
        for (int i = 0; i < 64; ++i) wgmma::pin(acc[i]);
      }
      __syncthreads();
    }
  }

  // acc[4j + e]: row (row + 8 (e / 2)), token 8j + 2t + e % 2 of the tile.
  const int row_in_tile = 64 * wg + 16 * (warp % 4) + g;
  if (splits == 1) {
    if (!active) return;
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      const int64_t token = token0 + 8 * (i / 4) + 2 * t + i % 2;
      if (token >= n) continue;
      float* out = y + token * m + row + 8 * ((i % 4) / 2);
      *out = beta == 0.0f ? acc[i] : acc[i] + beta * *out;
    }
    return;
  }
  const int64_t tiles = static_cast<int64_t>(gridDim.x) * gridDim.y;
  const int64_t tile = static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x;
  auto tile_index = [&](int i) { return (8 * (i / 4) + 2 * t + i % 2) * kBlockRows + row_in_tile + 8 * ((i % 4) / 2); };
  if (active) {
    float* mine = partials + (split * tiles + tile) * kTileFloats;
#pragma unroll
    for (int i = 0; i < 64; ++i) mine[tile_index(i)] = acc[i];
  }
  __threadfence();
  __syncthreads();
  if (tid == 0) last_block = atomicAdd(counters + tile, 1) == splits - 1;
  __syncthreads();
  if (!last_block) return;
  __threadfence();
  if (active) {
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      const int64_t token = token0 + 8 * (i / 4) + 2 * t + i % 2;
      if (token >= n) continue;
      float sum = 0.0f;
      for (int s = 0; s < splits; ++s) sum += __ldcg(partials + (s * tiles + tile) * kTileFloats + tile_index(i));
      float* out = y + token * m + row + 8 * ((i % 4) / 2);
      *out = beta == 0.0f ? sum : sum + beta * *out;
    }
  }
  if (tid == 0) counters[tile] = 0;
#else
  (void)x, (void)codes, (void)groups, (void)y, (void)n, (void)m, (void)k, (void)group_shift, (void)beta, (void)partials,
      (void)counters;
  __trap();
#endif
}

int device_attribute(cudaDeviceAttr attr) {
  int device = 0, value = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&value, attr, device);
  return value;
}

template <class Codes>
void launch(const void* x, const uint8_t* codes, const uint32_t* groups, int group_shift, float* y, int64_t n,
            int64_t m, int64_t k, float beta, void* workspace, size_t workspace_bytes, int* counters,
            cudaStream_t stream) {
  static const int sms = device_attribute(cudaDevAttrMultiProcessorCount);
  const int64_t row_tiles = (m + kBlockRows - 1) / kBlockRows, token_tiles = (n + kTokens - 1) / kTokens;
  const int64_t tiles = row_tiles * token_tiles;
  // One block an SM (its registers): split k only as far as one wave holds, so that no second,
  // mostly empty wave follows.
  int64_t splits = 1;
  if (tiles < sms && tiles <= kGroupedWgmmaCounters && counters != nullptr) {
    const int64_t fit = static_cast<int64_t>(workspace_bytes / (static_cast<size_t>(tiles) * kTileFloats * 4));
    splits = std::max<int64_t>(1, std::min({sms / tiles, int64_t{kMaxSplits}, k / kChunk / 4, fit}));
  }
  const dim3 grid(static_cast<unsigned>(row_tiles), static_cast<unsigned>(token_tiles), static_cast<unsigned>(splits));
  grouped_wgmma_kernel<Codes><<<grid, kThreads, kSmemBytes, stream>>>(static_cast<const uint16_t*>(x), codes, groups, y,
                                                                      static_cast<int>(n), m, k, group_shift, beta,
                                                                      static_cast<float*>(workspace), counters);
}

}  // namespace

bool grouped_wgmma_gemm_supports(const void* x, int64_t n, int64_t m, int64_t k) {
  static const bool hopper = device_attribute(cudaDevAttrComputeCapabilityMajor) == 9;
  return hopper && n >= 1 && n <= INT_MAX && m % 64 == 0 && k % kChunk == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

void grouped_wgmma_gemm(int code_bits, const void* x, const uint8_t* codes, const uint32_t* groups, int group_shift,
                        float* y, int64_t n, int64_t m, int64_t k, float beta, void* workspace, size_t workspace_bytes,
                        int* counters, CUstream_st* stream) {
  assert(grouped_wgmma_gemm_supports(x, n, m, k));
  if (code_bits == 4) {
    launch<Int4Codes>(x, codes, groups, 5, y, n, m, k, beta, workspace, workspace_bytes, counters, stream);
  } else {
    launch<Int8Codes>(x, codes, groups, group_shift, y, n, m, k, beta, workspace, workspace_bytes, counters, stream);
  }
}

}  // namespace folio::cuda
