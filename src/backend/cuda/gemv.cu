#include "backend/cuda/gemv.h"
#include "backend/cuda/programmatic_launch.cuh"
#include "backend/cuda/weight_loads.cuh"

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cassert>

namespace folio::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

// What one 16-byte chunk of a weight row holds, widened to floats.
// kUnroll: chunks in flight per lane before any arithmetic, enough outstanding loads per SM to
// cover memory latency at full bandwidth. FP8 takes 8: a 4096-wide row is then one round trip
// per lane (4 measured 3.0 TB/s on the Llama-3-8B QKV weight, H200).
struct Bf16Weights {
  static constexpr int kPerChunk = 8;
  static constexpr int kUnroll = 4;
  __device__ __forceinline__ static void unpack(const uint4 v, float (&out)[kPerChunk]) { unpack_bf16x8(v, out); }
};
struct Fp8Weights {
  static constexpr int kPerChunk = 16;
  static constexpr int kUnroll = 8;
  // e4m3x2 -> f16x2 in one instruction (sm_89+), exact; then to floats.
  __device__ __forceinline__ static void unpack(const uint4 v, float (&out)[kPerChunk]) {
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const __half2_raw raw =
            __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>((words[i] >> (16 * h)) & 0xffffu), __NV_E4M3);
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&raw));
        out[4 * i + 2 * h] = f.x;
        out[4 * i + 2 * h + 1] = f.y;
      }
    }
  }
};

// scales: per output feature (FP8), or null (BF16).
template <class Weights, int N>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gemv_kernel(const uint16_t* __restrict__ x, const void* __restrict__ w, const float* __restrict__ scales,
                float* __restrict__ y, int64_t m, int64_t k, float beta) {
  constexpr int kPer = Weights::kPerChunk;
  const int lane = threadIdx.x % 32;
  const int64_t feature = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (feature >= m) return;
  const int64_t chunks = k / kPer;
  const auto* w_row = static_cast<const uint4*>(w) + feature * chunks;
  // Launched programmatically, only the weights move before the kernel ahead finishes.
  if (lane == 0) prefetch_l2(w_row, static_cast<uint32_t>(chunks * 16));
  wait_for_previous_kernel();
  float acc[N];
#pragma unroll
  for (int r = 0; r < N; ++r) acc[r] = 0.0f;
  constexpr int kUnroll = Weights::kUnroll;
  auto accumulate = [&](const uint4 weights, int64_t c) {
    float wf[kPer];
    Weights::unpack(weights, wf);
#pragma unroll
    for (int r = 0; r < N; ++r) {
      const auto* x_chunk = reinterpret_cast<const uint4*>(x + r * k + c * kPer);
#pragma unroll
      for (int part = 0; part < kPer / 8; ++part) {
        float xf[8];
        unpack_bf16x8(__ldg(x_chunk + part), xf);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[r] = fmaf(wf[8 * part + i], xf[i], acc[r]);
      }
    }
  };
  int64_t c = lane;
  for (; c + (kUnroll - 1) * 32 < chunks; c += kUnroll * 32) {
    uint4 loaded[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) loaded[u] = load_streaming(w_row + c + u * 32);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) accumulate(loaded[u], c + u * 32);
  }
  for (; c < chunks; c += 32) accumulate(load_streaming(w_row + c), c);
#pragma unroll
  for (int r = 0; r < N; ++r) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], offset);
  }
  if (lane == 0) {
    const float scale = scales != nullptr ? scales[feature] : 1.0f;
#pragma unroll
    for (int r = 0; r < N; ++r) {
      float* out = y + r * m + feature;
      const float product = acc[r] * scale;
      *out = beta == 0.0f ? product : product + beta * *out;
    }
  }
}

template <class Weights, int N>
void launch(const void* x, const void* w, const float* scales, float* y, int64_t m, int64_t k, float beta,
            CUstream_st* stream, bool programmatic) {
  const auto blocks = static_cast<unsigned>((m + kWarpsPerBlock - 1) / kWarpsPerBlock);
  launch_kernel(programmatic, gemv_kernel<Weights, N>, dim3(blocks), dim3(kWarpsPerBlock * 32), 0, stream,
                static_cast<const uint16_t*>(x), w, scales, y, m, k, beta);
}

template <class Weights>
void dispatch(const void* x, const void* w, const float* scales, float* y, int64_t n, int64_t m, int64_t k, float beta,
              CUstream_st* stream, bool programmatic) {
  switch (n) {
    case 1: launch<Weights, 1>(x, w, scales, y, m, k, beta, stream, programmatic); break;
    case 2: launch<Weights, 2>(x, w, scales, y, m, k, beta, stream, programmatic); break;
    case 3: launch<Weights, 3>(x, w, scales, y, m, k, beta, stream, programmatic); break;
    case 4: launch<Weights, 4>(x, w, scales, y, m, k, beta, stream, programmatic); break;
    case 5: launch<Weights, 5>(x, w, scales, y, m, k, beta, stream, programmatic); break;
    case 6: launch<Weights, 6>(x, w, scales, y, m, k, beta, stream, programmatic); break;
    case 7: launch<Weights, 7>(x, w, scales, y, m, k, beta, stream, programmatic); break;
    default: launch<Weights, 8>(x, w, scales, y, m, k, beta, stream, programmatic); break;
  }
}

}  // namespace

bool gemv_supports(const void* x, const void* w, int64_t n, int64_t k) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return n >= 1 && n <= kGemvMaxRows && k % 16 == 0 && aligned(x) && aligned(w);
}

void bf16_gemv(const void* x, const void* w, float* y, int64_t n, int64_t m, int64_t k, float beta, CUstream_st* stream,
               bool programmatic) {
  assert(gemv_supports(x, w, n, k));
  dispatch<Bf16Weights>(x, w, nullptr, y, n, m, k, beta, stream, programmatic);
}

void fp8_gemv(const void* x, const void* w, const float* scales, float* y, int64_t n, int64_t m, int64_t k, float beta,
              CUstream_st* stream, bool programmatic) {
  assert(gemv_supports(x, w, n, k) && scales != nullptr);
  dispatch<Fp8Weights>(x, w, scales, y, n, m, k, beta, stream, programmatic);
}

}  // namespace folio::cuda
