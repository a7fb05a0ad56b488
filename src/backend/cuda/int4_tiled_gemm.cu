#include <cuda_runtime.h>

#include <algorithm>
#include <cassert>
#include <cstdint>

#include "backend/cuda/int4_gemm.h"
#include "backend/cuda/int4_mma.cuh"
#include "backend/cuda/weight_loads.cuh"

namespace folio::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kRows = 16 * kWarps;  // weight rows a block computes: 16 per warp
constexpr int kStep = 256;          // k columns staged per step: four 64-column chunks
constexpr int kUnits = kStep / 8;   // 16-byte units of a staged token row

// 16-byte unit u of token row `token` in shared memory: the low three bits XOR the token's, so
// the 8 tokens a quarter-warp reads hit 8 different bank groups.
__device__ __forceinline__ int swizzled(int token, int unit) {
  return (unit & ~7) | ((unit ^ token) & 7);
}

__device__ __forceinline__ void cp_async16(void* smem, const void* global) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(global));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;");
}
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending));
}

// Block (x: 128 weight rows, y: 64 tokens, z: a share of k). Each warp owns 16 rows over the
// block's k range and every token of the block; the tokens' activations are staged in shared
// memory a step (256 columns) at a time, double-buffered with cp.async, so each block reads x
// once instead of once per 16 rows. Fragment slots as in int4_small_gemm (int4_gemm.h).
template <int kTiles>
__global__ void __launch_bounds__(kWarps * 32)
    int4_tiled_gemm_kernel(const uint16_t* __restrict__ x, const uint8_t* __restrict__ codes,
                           const uint32_t* __restrict__ groups, float* __restrict__ out, int n, int64_t m, int64_t k,
                           float beta, int splits) {
  extern __shared__ uint4 staged[];  // [2][kTiles * 8 tokens][kUnits]
  constexpr int kTokens = kTiles * 8;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRows + 16 * warp + g;
  const int token0 = static_cast<int>(blockIdx.y) * 64;
  const int64_t steps = k / kStep;
  const int64_t begin = steps * blockIdx.z / splits, end = steps * (blockIdx.z + 1) / splits;
  const int64_t row_bytes = k / 2, row_groups = k >> kInt4GroupShift;
  const uint8_t* w_lo = codes + row * row_bytes + 8 * t;
  const uint8_t* w_hi = w_lo + 8 * row_bytes;
  const uint32_t* g_lo = groups + row * row_groups;
  const uint32_t* g_hi = g_lo + 8 * row_groups;

  auto stage = [&](int64_t s, int buffer) {
    uint4* dst = staged + buffer * kTokens * kUnits;
    for (int u = threadIdx.x; u < kTokens * kUnits; u += kWarps * 32) {
      const int token = u / kUnits, unit = u % kUnits;
      // Tokens past n copy token 0 (any valid row) and are never written.
      const int source = token0 + token < n ? token0 + token : 0;
      cp_async16(dst + token * kUnits + swizzled(token, unit),
                 x + static_cast<int64_t>(source) * k + s * kStep + 8 * unit);
    }
    cp_async_commit();
  };
  struct Weights {
    uint2 lo[4], hi[4];
  };
  auto load = [&](int64_t s, Weights& w) {
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      w.lo[c] = load_streaming8(w_lo + (s * 4 + c) * 32);
      w.hi[c] = load_streaming8(w_hi + (s * 4 + c) * 32);
    }
  };

  float acc[kTiles][4] = {};
  Weights next;
  if (begin < end) {
    stage(begin, 0);
    load(begin, next);
  }
  for (int64_t s = begin; s < end; ++s) {
    const Weights current = next;
    const int buffer = static_cast<int>((s - begin) & 1);
    if (s + 1 < end) {
      stage(s + 1, buffer ^ 1);
      load(s + 1, next);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const uint4* xs = staged + buffer * kTokens * kUnits;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int64_t group = ((s * 4 + c) * 64 + 16 * t) >> kInt4GroupShift;
      uint32_t a[2][2][4];
      dequantize_fragments(current.lo[c], current.hi[c], __ldg(g_lo + group), __ldg(g_hi + group), a);
#pragma unroll
      for (int tile = 0; tile < kTiles; ++tile) {
        const int token = tile * 8 + g;
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const uint4 b = xs[token * kUnits + swizzled(token, 8 * c + 2 * t + i)];
          mma_bf16(acc[tile], a[i][0][0], a[i][0][1], a[i][0][2], a[i][0][3], b.x, b.y);
          mma_bf16(acc[tile], a[i][1][0], a[i][1][1], a[i][1][2], a[i][1][3], b.z, b.w);
        }
      }
    }
    __syncthreads();  // the buffer is staged again two steps on
  }

  // C slots: (row g, tokens 2t, 2t + 1) and (row g + 8, the same). One split writes y itself;
  // several write partial sums (out = partials, [split][n][m]) for int4_reduce_kernel.
  const bool direct = splits == 1;
  float* base = direct ? out : out + static_cast<int64_t>(blockIdx.z) * n * m;
#pragma unroll
  for (int tile = 0; tile < kTiles; ++tile) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int token = token0 + tile * 8 + 2 * t + (e & 1);
      if (token >= n) continue;
      float* o = base + static_cast<int64_t>(token) * m + row + (e >= 2 ? 8 : 0);
      *o = direct && beta != 0.0f ? acc[tile][e] + beta * *o : acc[tile][e];
    }
  }
}

__global__ void int4_reduce_kernel(const float* __restrict__ partials, float* __restrict__ y, int64_t outputs,
                                   int splits, float beta) {
  const int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (o >= outputs) return;
  float sum = 0.0f;
  for (int s = 0; s < splits; ++s) sum += partials[s * outputs + o];
  y[o] = beta == 0.0f ? sum : sum + beta * y[o];
}

int sm_count() {
  static const int count = [] {
    int device = 0, value = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, device);
    return value > 0 ? value : 1;
  }();
  return count;
}

template <int kTiles>
void launch(const void* x, const uint8_t* codes, const uint32_t* groups, float* out, int64_t n, int64_t m, int64_t k,
            float beta, int splits, int64_t y_blocks, CUstream_st* stream) {
  constexpr size_t kSmem = 2 * kTiles * 8 * kUnits * sizeof(uint4);
  static const bool configured = [] {
    cudaFuncSetAttribute(int4_tiled_gemm_kernel<kTiles>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(kSmem));
    return true;
  }();
  (void)configured;
  const dim3 grid(static_cast<unsigned>(m / kRows), static_cast<unsigned>(y_blocks), static_cast<unsigned>(splits));
  int4_tiled_gemm_kernel<kTiles><<<grid, kWarps * 32, kSmem, stream>>>(static_cast<const uint16_t*>(x), codes, groups,
                                                                       out, static_cast<int>(n), m, k, beta, splits);
}

}  // namespace

bool int4_tiled_gemm_supports(const void* x, int64_t n, int64_t m, int64_t k) {
  return n >= 1 && m % kRows == 0 && k % kStep == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

int64_t int4_tiled_gemm_workspace_floats(int64_t n, int64_t m, int64_t k) {
  const int64_t blocks = (m / kRows) * ((n + 63) / 64);
  const int64_t wanted = (2 * sm_count() + blocks - 1) / blocks;
  const int64_t splits = std::clamp<int64_t>(wanted, 1, std::min<int64_t>(8, k / kStep));
  return splits > 1 ? splits * n * m : 0;
}

void int4_tiled_gemm(const void* x, const uint8_t* codes, const uint32_t* groups, float* y, float* workspace, int64_t n,
                     int64_t m, int64_t k, float beta, CUstream_st* stream) {
  assert(int4_tiled_gemm_supports(x, n, m, k));
  const int64_t y_blocks = (n + 63) / 64;
  const int64_t partial_floats = int4_tiled_gemm_workspace_floats(n, m, k);
  const int splits = partial_floats == 0 ? 1 : static_cast<int>(partial_floats / (n * m));
  float* out = splits == 1 ? y : workspace;
  const int64_t tokens = std::min<int64_t>(n, 64);
  switch ((tokens + 7) / 8) {
    case 1: launch<1>(x, codes, groups, out, n, m, k, beta, splits, y_blocks, stream); break;
    case 2: launch<2>(x, codes, groups, out, n, m, k, beta, splits, y_blocks, stream); break;
    case 3: launch<3>(x, codes, groups, out, n, m, k, beta, splits, y_blocks, stream); break;
    case 4: launch<4>(x, codes, groups, out, n, m, k, beta, splits, y_blocks, stream); break;
    case 5: launch<5>(x, codes, groups, out, n, m, k, beta, splits, y_blocks, stream); break;
    case 6: launch<6>(x, codes, groups, out, n, m, k, beta, splits, y_blocks, stream); break;
    case 7: launch<7>(x, codes, groups, out, n, m, k, beta, splits, y_blocks, stream); break;
    default: launch<8>(x, codes, groups, out, n, m, k, beta, splits, y_blocks, stream); break;
  }
  if (splits > 1) {
    const int64_t outputs = n * m;
    constexpr int kThreads = 256;
    int4_reduce_kernel<<<static_cast<unsigned>((outputs + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        workspace, y, outputs, splits, beta);
  }
}

}  // namespace folio::cuda
