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
constexpr int kChunk = 64;                         // k columns a stage holds: 128 bytes a token
constexpr int kStageBytes = kTokens * kChunk * 2;  // 16 KB
constexpr int kStages = 4;
constexpr int kSmemBytes = kStages * kStageBytes + 1024;  // + slack for 1,024-byte alignment
constexpr int kMaxSplits = 8;
constexpr int kTileFloats = kBlockRows * kTokens;

#if FOLIO_WGMMA
constexpr int kLookahead = kStages - 2;  // chunks being copied while one computes
constexpr int kPrefetch = 4;             // weight chunks in flight a thread (registers)

// Where word w (columns 2w, 2w + 1) of a token's 64-column chunk goes in its stage row. The
// small kernel's register layout (grouped_small_gemm.cuh) gives the 16-byte piece q = w / 4
// (columns 8q..8q+7) to thread t = q / 2 as MMA steps s = 2 (q % 2) and s + 1, k slots 2t,
// 2t + 1 (the piece's first and third words) and 2t + 8, 2t + 9 (second and fourth). Step s is
// bytes 32s..32s+31 of the row, slot j at byte 2j: the piece's word i goes to byte
// 64 (q % 2) + 16 i + 4 t.
__device__ __forceinline__ uint32_t stage_byte(int w) {
  const int q = w / 4, i = w % 4;
  return 64 * (q % 2) + 16 * i + 4 * (q / 2);
}

__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
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
  const uint32_t base = (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023u) & ~1023u;
  __shared__ int last_block;

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, wg = warp / 4;
  const int g = lane / 4, t = lane % 4;
  const int splits = static_cast<int>(gridDim.z), split = static_cast<int>(blockIdx.z);
  const int64_t token0 = static_cast<int64_t>(blockIdx.y) * kTokens;
  const int64_t wg_row0 = static_cast<int64_t>(blockIdx.x) * kBlockRows + 64 * wg;
  // m % 128 == 64: the last block's second warpgroup computes the first one's rows again and
  // stores nothing. (It runs the main loop all the same: a wgmma under a branch that depends
  // on the thread index makes ptxas serialize every wgmma of the kernel, warning C7518.)
  const bool active = wg_row0 < m;
  const int64_t row = wg_row0 + 16 * (warp % 4) + g;  // this thread's rows: row and row + 8
  const int64_t src_row = active ? row : row - 64;
  const int64_t chunks = k / kChunk;
  const int64_t begin = chunks * split / splits, end = chunks * (split + 1) / splits;
  const int64_t row_bytes = chunks * Codes::kChunkBytes, row_groups = k >> group_shift;
  const uint8_t* const w_lo = codes + src_row * row_bytes + Codes::kChunkBytes / 4 * t;
  const uint8_t* const w_hi = w_lo + 8 * row_bytes;
  const uint32_t* const g_lo = groups + src_row * row_groups;
  const uint32_t* const g_hi = g_lo + 8 * row_groups;

  // Activations: warp w copies tokens w + 8 r, a lane one 4-byte word of the token's chunk (a
  // warp reads 128 contiguous bytes and writes one row's 32 banks). Tokens past n are zeros.
  const uint32_t dst_in_row = wgmma::swizzled_offset(warp, stage_byte(lane));  // row & 7 == warp
  auto copy_x = [&](int64_t c) {
    if (c < end) {
      const uint32_t stage = base + static_cast<uint32_t>(c % kStages) * kStageBytes;
#pragma unroll
      for (int r = 0; r < kTokens / 8; ++r) {
        const int64_t token = token0 + warp + 8 * r;
        const bool valid = token < n;
        cp_async_4(stage + (8 * r) * 128 + dst_in_row, x + (valid ? token : 0) * k + c * kChunk + 2 * lane, valid);
      }
    }
    cp_async_commit();  // empty past the end: the group count stays uniform
  };

  // A chunk's codes and its (scale, min) words are loaded kPrefetch chunks ahead: with every
  // warp meeting at each chunk's barrier, a load issued when it is needed would stall the block
  // for a whole memory latency per chunk.
  Chunk lo[kPrefetch], hi[kPrefetch];
  uint32_t lo_group[kPrefetch], hi_group[kPrefetch];
  auto load_w = [&](int slot, int64_t c) {
    lo[slot] = Codes::load(w_lo + c * Codes::kChunkBytes);
    hi[slot] = Codes::load(w_hi + c * Codes::kChunkBytes);
    const int64_t group = (c * kChunk + 16 * t) >> group_shift;
    lo_group[slot] = __ldg(g_lo + group);
    hi_group[slot] = __ldg(g_hi + group);
  };
  uint32_t a[2][2][2][4];  // (buffer, i, h) -> a0..a3 of MMA step 2i + h
  auto dequantize = [&](int slot, uint32_t(&out)[2][2][4]) {
    Codes::dequantize(lo[slot], hi[slot], lo_group[slot], hi_group[slot], out);
  };

#pragma unroll
  for (int j = 0; j < kLookahead; ++j) copy_x(begin + j);
#pragma unroll
  for (int u = 0; u < kPrefetch; ++u) {
    if (begin + u < end) load_w(u, begin + u);
  }
  dequantize(0, a[0]);
  if (begin + kPrefetch < end) load_w(0, begin + kPrefetch);

  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  // Chunk begin + j: weights in ring slot j % kPrefetch, operands in a[j % 2], activations in
  // stage (begin + j) % kStages, copied kLookahead chunks ahead. One chunk's MMAs stay in
  // flight while the next is dequantized; the copy into a stage starts only after the MMAs
  // that read it two chunks earlier were waited for by every warpgroup (the barrier).
  for (int64_t c0 = begin; c0 < end; c0 += kPrefetch) {
#pragma unroll
    for (int u = 0; u < kPrefetch; ++u) {
      const int64_t c = c0 + u;
      if (c >= end) break;
      cp_async_wait<kLookahead - 1>();  // this thread's copies of chunk c have landed
      wgmma::fence_async_shared();
      __syncthreads();  // everyone's have; chunk c - 2's MMAs are done everywhere
      copy_x(c + kLookahead);
      const uint64_t stage_desc = wgmma::descriptor(base + static_cast<uint32_t>(c % kStages) * kStageBytes);
      wgmma::fence();
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const uint32_t(&op)[4] = a[u % 2][s / 2][s % 2];
        wgmma::mma_m64n128k16(acc, op[0], op[1], op[2], op[3], stage_desc + 2 * s);  // + 32 s bytes
      }
      wgmma::commit();
      wgmma::wait<1>();  // chunk c - 1's MMAs are done: its operands may be overwritten
#pragma unroll
      for (int s = 0; s < 4; ++s) {
#pragma unroll
        for (int e = 0; e < 4; ++e) wgmma::pin(a[(u + 1) % 2][s / 2][s % 2][e]);
      }
      if (c + 1 < end) {
        const int slot = (u + 1) % kPrefetch;
        dequantize(slot, a[(u + 1) % 2]);
        if (c + 1 + kPrefetch < end) load_w(slot, c + 1 + kPrefetch);
      }
    }
  }
  wgmma::wait<0>();
#pragma unroll
  for (int i = 0; i < 64; ++i) wgmma::pin(acc[i]);
  cp_async_wait<0>();

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
  static const bool smem_raised =
      cudaFuncSetAttribute(grouped_wgmma_kernel<Codes>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes) ==
      cudaSuccess;
  (void)smem_raised;
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
