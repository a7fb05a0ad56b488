#include <cassert>
#include <cstdint>

#include "backend/cuda/fp8_small_gemm.h"
#include "backend/cuda/weight_loads.cuh"

namespace folio::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kRows = 16;   // weight rows a block computes (the MMA's M)
constexpr int kChunk = 64;  // k bytes one step of a warp covers (two m16n8k32)
constexpr int kUnroll = 4;  // chunks in flight per thread before any MMA

// d += a b: A 16x32 E4M3 (row-major), B 32x8 E4M3 (column-major), fp32 accumulators.
__device__ __forceinline__ void mma_e4m3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
  (void)d, (void)a0, (void)a1, (void)a2, (void)a3, (void)b0, (void)b1;
  __trap();  // fp8_small_gemm_supports is only consulted for FP8 weights, which need sm_89+
#endif
}

// Lane (g = lane / 4, t = lane % 4). In m16n8k32 a thread's A slots are rows g and g + 8 at
// k = 4t..4t+3 (registers a0, a1) and 16+4t..16+4t+3 (a2, a3); its B slots are column g at
// the same two k ranges (b0, b1). Over a 64-byte chunk, MMA j's slots of thread t take the
// physical bytes 16t + 8j .. 16t + 8j + 7: every byte once, and one 16-byte load per row.
template <int kTiles>
__global__ void __launch_bounds__(kWarps * 32)
    fp8_small_gemm_kernel(const uint8_t* __restrict__ x8, const float* __restrict__ x_scales,
                          const uint8_t* __restrict__ w8, const float* __restrict__ w_scales, float* __restrict__ y,
                          int n, int64_t m, int64_t k, float beta) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int64_t chunks = k / kChunk;
  const int64_t begin = chunks * warp / kWarps, end = chunks * (warp + 1) / kWarps;
  const uint8_t* w_lo = w8 + (row0 + g) * k + 16 * t;
  const uint8_t* w_hi = w_lo + 8 * k;
  // Tokens past n read token 0 (any valid row) and are never written.
  const uint8_t* x_rows[kTiles];
#pragma unroll
  for (int tile = 0; tile < kTiles; ++tile) {
    const int token = tile * 8 + g;
    x_rows[tile] = x8 + static_cast<int64_t>(token < n ? token : 0) * k + 16 * t;
  }
  float acc[kTiles][4] = {};
  auto step = [&](const uint4 lo, const uint4 hi, int64_t c) {
#pragma unroll
    for (int tile = 0; tile < kTiles; ++tile) {
      const uint4 b = __ldg(reinterpret_cast<const uint4*>(x_rows[tile] + c * kChunk));
      mma_e4m3(acc[tile], lo.x, hi.x, lo.y, hi.y, b.x, b.y);
      mma_e4m3(acc[tile], lo.z, hi.z, lo.w, hi.w, b.z, b.w);
    }
  };
  int64_t c = begin;
  for (; c + kUnroll <= end; c += kUnroll) {
    uint4 lo[kUnroll], hi[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      lo[u] = load_streaming(w_lo + (c + u) * kChunk);
      hi[u] = load_streaming(w_hi + (c + u) * kChunk);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) step(lo[u], hi[u], c + u);
  }
  for (; c < end; ++c) step(load_streaming(w_lo + c * kChunk), load_streaming(w_hi + c * kChunk), c);

  // Sum the 8 warps' partial products: C slots are (row g, tokens 2t, 2t+1) and (row g + 8, same).
  __shared__ float partial[kWarps][kTiles][kRows][8];
#pragma unroll
  for (int tile = 0; tile < kTiles; ++tile) {
    partial[warp][tile][g][2 * t] = acc[tile][0];
    partial[warp][tile][g][2 * t + 1] = acc[tile][1];
    partial[warp][tile][g + 8][2 * t] = acc[tile][2];
    partial[warp][tile][g + 8][2 * t + 1] = acc[tile][3];
  }
  __syncthreads();
  for (int o = threadIdx.x; o < kTiles * kRows * 8; o += kWarps * 32) {
    const int tile = o / (kRows * 8), row = (o / 8) % kRows, col = o % 8;
    const int token = tile * 8 + col;
    if (token >= n) continue;
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += partial[w][tile][row][col];
    const int64_t feature = row0 + row;
    float* out = y + static_cast<int64_t>(token) * m + feature;
    const float product = sum * w_scales[feature] * x_scales[token];
    *out = beta == 0.0f ? product : product + beta * *out;
  }
}

template <int kTiles>
void launch(const uint8_t* x8, const float* x_scales, const uint8_t* w8, const float* w_scales, float* y, int64_t n,
            int64_t m, int64_t k, float beta, CUstream_st* stream) {
  fp8_small_gemm_kernel<kTiles><<<static_cast<unsigned>(m / kRows), kWarps * 32, 0, stream>>>(
      x8, x_scales, w8, w_scales, y, static_cast<int>(n), m, k, beta);
}

}  // namespace

bool fp8_small_gemm_supports(const void* x8, const void* w8, int64_t n, int64_t m, int64_t k) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return n >= 1 && n <= kFp8SmallGemmMaxRows && m % kRows == 0 && k % kChunk == 0 && aligned(x8) && aligned(w8);
}

void fp8_small_gemm(const uint8_t* x8, const float* x_scales, const uint8_t* w8, const float* w_scales, float* y,
                    int64_t n, int64_t m, int64_t k, float beta, CUstream_st* stream) {
  assert(fp8_small_gemm_supports(x8, w8, n, m, k));
  switch ((n + 7) / 8) {
    case 1: launch<1>(x8, x_scales, w8, w_scales, y, n, m, k, beta, stream); break;
    case 2: launch<2>(x8, x_scales, w8, w_scales, y, n, m, k, beta, stream); break;
    case 3: launch<3>(x8, x_scales, w8, w_scales, y, n, m, k, beta, stream); break;
    case 4: launch<4>(x8, x_scales, w8, w_scales, y, n, m, k, beta, stream); break;
    case 5: launch<5>(x8, x_scales, w8, w_scales, y, n, m, k, beta, stream); break;
    case 6: launch<6>(x8, x_scales, w8, w_scales, y, n, m, k, beta, stream); break;
    case 7: launch<7>(x8, x_scales, w8, w_scales, y, n, m, k, beta, stream); break;
    default: launch<8>(x8, x_scales, w8, w_scales, y, n, m, k, beta, stream); break;
  }
}

}  // namespace folio::cuda
