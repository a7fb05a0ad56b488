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
constexpr int kChunk = 64;  // k columns a stage holds: 128 bytes a token
constexpr int kStages = 5;
constexpr int kXBytes = kTokens * kChunk * 2;  // 16 KB of activations a stage
constexpr int kGroupRowBytes = 16;             // up to 4 (scale, min) words a row and chunk
constexpr int kMaxSplits = 8;
constexpr int kTileFloats = kBlockRows * kTokens;

// A stage: the activations (1,024-byte aligned, swizzled), then each row's codes, then its
// group words, rounded up to 1,024 bytes.
template <class Codes>
constexpr int stage_bytes() {
  return (kXBytes + kBlockRows * (Codes::kSmemRowBytes + kGroupRowBytes) + 1023) / 1024 * 1024;
}
template <class Codes>
constexpr int smem_bytes() {
  return kStages * stage_bytes<Codes>() + 1024;  // + slack for the alignment
}

#if FOLIO_WGMMA
constexpr int kLookahead = 3;  // chunks being copied while one computes and the next dequantizes

__device__ __forceinline__ void cp_async(uint32_t dst, const void* src, int bytes, bool valid) {
  if (bytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
  } else if (bytes == 8) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(dst), "l"(src), "r"(valid ? 8 : 0) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0) : "memory");
  }
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
  constexpr int kStageBytes = stage_bytes<Codes>();
  constexpr int kCodesOffset = kXBytes, kGroupsOffset = kXBytes + kBlockRows * Codes::kSmemRowBytes;
  constexpr int kCodePieces = kBlockRows * Codes::kChunkBytes / 16;  // 16-byte copies of a stage's codes
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw_addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw_addr + 1023u) & ~1023u;
  const uint8_t* const smem = smem_raw + (base - raw_addr);
  __shared__ int last_block;

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, wg = warp / 4;
  const int g = lane / 4, t = lane % 4;
  const int splits = static_cast<int>(gridDim.z), split = static_cast<int>(blockIdx.z);
  const int64_t token0 = static_cast<int64_t>(blockIdx.y) * kTokens;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kBlockRows;
  // m % 128 == 64: the last block's second warpgroup computes the first one's rows again and
  // stores nothing. (It runs the main loop all the same: a wgmma under a branch that depends
  // on the thread index makes ptxas serialize every wgmma of the kernel, warning C7518.)
  const bool active = row0 + 64 * wg < m;
  const int row_in_tile = 64 * wg + 16 * (warp % 4) + g;  // this thread's rows: this and + 8
  const int64_t row = row0 + row_in_tile;
  const int64_t chunks = k / kChunk;
  const int64_t begin = chunks * split / splits, end = chunks * (split + 1) / splits;
  const int64_t row_bytes = chunks * Codes::kChunkBytes, row_groups = k >> group_shift;
  // A row's (scale, min) words a chunk: 4 or 2 (16- or 32-column groups), else the one word of
  // the group the chunk lies in (an INT4 checkpoint's 64 columns or more).
  const int group_words = group_shift <= 6 ? kChunk >> group_shift : 1;

  // One chunk into its stage, all in 16-byte (group words: 4-, 8- or 16-byte) copies: the
  // tokens' 64 columns at their swizzled rows (zeros past n), the rows' codes and group words.
  auto copy_chunk = [&](int64_t c) {
    if (c < end) {
      const uint32_t stage = base + static_cast<uint32_t>(c % kStages) * kStageBytes;
#pragma unroll
      for (int r = 0; r < kXBytes / 16 / kThreads; ++r) {
        const int token = tid / 8 + 32 * r, q = tid % 8;
        const bool valid = token0 + token < n;
        cp_async(stage + wgmma::swizzled_offset(token, 16 * q),
                 x + (valid ? token0 + token : 0) * k + c * kChunk + 8 * q, 16, valid);
      }
#pragma unroll
      for (int r = 0; r < kCodePieces / kThreads; ++r) {
        const int p = tid + kThreads * r;
        const int tile_row = p / (Codes::kChunkBytes / 16), piece = p % (Codes::kChunkBytes / 16);
        const int64_t src_row = row0 + tile_row < m ? row0 + tile_row : row0 + tile_row - 64;
        cp_async(stage + kCodesOffset + tile_row * Codes::kSmemRowBytes + 16 * piece,
                 codes + src_row * row_bytes + c * Codes::kChunkBytes + 16 * piece, 16, true);
      }
      if (tid < kBlockRows) {
        const int64_t src_row = row0 + tid < m ? row0 + tid : row0 + tid - 64;
        cp_async(stage + kGroupsOffset + tid * kGroupRowBytes,
                 groups + src_row * row_groups + ((c * kChunk) >> group_shift), 4 * group_words, true);
      }
    }
    cp_async_commit();  // empty past the end: the group count stays uniform
  };
  uint32_t a[2][4][4];  // (buffer, k16 step) -> a0..a3
  auto dequantize = [&](int64_t c, uint32_t(&out)[4][4]) {
    const uint8_t* stage = smem + (c % kStages) * kStageBytes;
    const uint8_t* lo = stage + kCodesOffset + row_in_tile * Codes::kSmemRowBytes;
    const auto* lo_groups = reinterpret_cast<const uint32_t*>(stage + kGroupsOffset + row_in_tile * kGroupRowBytes);
    Codes::step_operands(lo, lo + 8 * Codes::kSmemRowBytes, lo_groups, lo_groups + 8 * kGroupRowBytes / 4, t,
                         group_shift, out);
  };

#pragma unroll
  for (int j = 0; j < kLookahead; ++j) copy_chunk(begin + j);
  cp_async_wait<kLookahead - 1>();
  __syncthreads();
  dequantize(begin, a[0]);

  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  // Chunk c: stage c % kStages, copied kLookahead chunks ahead; operands in a[(c - begin) % 2],
  // dequantized while chunk c - 1's MMAs run. A stage is copied into again only after its
  // chunk's MMAs were waited for and its codes read, by every warp (the barrier).
  for (int64_t c0 = begin; c0 < end; c0 += 2) {
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int64_t c = c0 + u;
      if (c >= end) break;
      cp_async_wait<kLookahead - 2>();  // this thread's copies of chunk c + 1 have landed
      wgmma::fence_async_shared();
      __syncthreads();  // everyone's have; chunk c - 2's MMAs and reads are done everywhere
      copy_chunk(c + kLookahead);
      const uint64_t stage_desc = wgmma::descriptor(base + static_cast<uint32_t>(c % kStages) * kStageBytes);
      wgmma::fence();
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        wgmma::mma_m64n128k16(acc, a[u][s][0], a[u][s][1], a[u][s][2], a[u][s][3], stage_desc + 2 * s);  // + 32 s B
      }
      wgmma::commit();
      wgmma::wait<1>();  // chunk c - 1's MMAs are done: its operands may be overwritten
#pragma unroll
      for (int s = 0; s < 4; ++s) {
#pragma unroll
        for (int e = 0; e < 4; ++e) wgmma::pin(a[1 - u][s][e]);
      }
      if (c + 1 < end) dequantize(c + 1, a[1 - u]);
    }
  }
  wgmma::wait<0>();
#pragma unroll
  for (int i = 0; i < 64; ++i) wgmma::pin(acc[i]);
  cp_async_wait<0>();

  // acc[4j + e]: row (row + 8 (e / 2)), token 8j + 2t + e % 2 of the tile.
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
    // Split by split, its 64 values a thread loaded at once: summing each value over the
    // splits before the next (as the first version did) waited a memory latency per value,
    // which is the suspect in the split grids' slowness (docs/BENCHMARKS.md). The order of
    // each value's sum, split 0 first, is the same.
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
    for (int s = 0; s < splits; ++s) {
      const float* part = partials + (s * tiles + tile) * kTileFloats;
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[i] += __ldcg(part + tile_index(i));
    }
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      const int64_t token = token0 + 8 * (i / 4) + 2 * t + i % 2;
      if (token >= n) continue;
      float* out = y + token * m + row + 8 * ((i % 4) / 2);
      *out = beta == 0.0f ? acc[i] : acc[i] + beta * *out;
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
      cudaFuncSetAttribute(grouped_wgmma_kernel<Codes>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           smem_bytes<Codes>()) == cudaSuccess;
  (void)smem_raised;
  const dim3 grid(static_cast<unsigned>(row_tiles), static_cast<unsigned>(token_tiles), static_cast<unsigned>(splits));
  grouped_wgmma_kernel<Codes><<<grid, kThreads, smem_bytes<Codes>(), stream>>>(
      static_cast<const uint16_t*>(x), codes, groups, y, static_cast<int>(n), m, k, group_shift, beta,
      static_cast<float*>(workspace), counters);
}

}  // namespace

bool grouped_wgmma_gemm_fills_device(int64_t n, int64_t m) {
  static const int sms = device_attribute(cudaDevAttrMultiProcessorCount);
  return 2 * ((m + kBlockRows - 1) / kBlockRows) * ((n + kTokens - 1) / kTokens) > sms;
}

bool grouped_wgmma_gemm_supports(const void* x, int64_t n, int64_t m, int64_t k) {
  static const bool hopper = device_attribute(cudaDevAttrComputeCapabilityMajor) == 9;
  return hopper && n >= 1 && n <= INT_MAX && m % 64 == 0 && k % kChunk == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

void grouped_wgmma_gemm(int code_bits, const void* x, const uint8_t* codes, const uint32_t* groups, int group_shift,
                        float* y, int64_t n, int64_t m, int64_t k, float beta, void* workspace, size_t workspace_bytes,
                        int* counters, CUstream_st* stream) {
  assert(grouped_wgmma_gemm_supports(x, n, m, k));
  if (code_bits == 4) {
    launch<Int4Codes>(x, codes, groups, group_shift, y, n, m, k, beta, workspace, workspace_bytes, counters, stream);
  } else {
    launch<Int8Codes>(x, codes, groups, group_shift, y, n, m, k, beta, workspace, workspace_bytes, counters, stream);
  }
}

}  // namespace folio::cuda
