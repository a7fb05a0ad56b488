#include <cuda_fp8.h>

#include <cassert>

#include "backend/cuda/fp8_rows.h"
#include "backend/cuda/weight_loads.cuh"

namespace folio::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kE4M3Max = 448.0f;

// One block per row: the row's amax (first pass), then its bytes (second pass, from L1/L2).
__global__ void __launch_bounds__(kThreads)
    quantize_rows_kernel(const uint16_t* __restrict__ x, int64_t cols, int64_t ld_x, uint8_t* __restrict__ out,
                         float* __restrict__ scales) {
  const int64_t row = blockIdx.x;
  const auto* in = reinterpret_cast<const uint4*>(x + row * ld_x);
  const int64_t chunks = cols / 8;
  float amax = 0.0f;
  for (int64_t c = threadIdx.x; c < chunks; c += kThreads) {
    float v[8];
    unpack_bf16x8(in[c], v);
#pragma unroll
    for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(v[i]));
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  __shared__ float warp_max[kThreads / 32];
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
  __syncthreads();
  amax = warp_max[0];
#pragma unroll
  for (int w = 1; w < kThreads / 32; ++w) amax = fmaxf(amax, warp_max[w]);
  // IEEE division (no fast math in folio's CUDA flags): the same inv as the CPU's.
  const float inv = amax > 0.0f ? kE4M3Max / amax : 0.0f;
  if (threadIdx.x == 0) scales[row] = amax > 0.0f ? amax / kE4M3Max : 0.0f;
  auto* dst = reinterpret_cast<uint2*>(out + row * cols);
  for (int64_t c = threadIdx.x; c < chunks; c += kThreads) {
    float v[8];
    unpack_bf16x8(in[c], v);
    uint32_t packed[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const __nv_fp8x2_storage_t lo =
          __nv_cvt_float2_to_fp8x2(make_float2(v[4 * h] * inv, v[4 * h + 1] * inv), __NV_SATFINITE, __NV_E4M3);
      const __nv_fp8x2_storage_t hi =
          __nv_cvt_float2_to_fp8x2(make_float2(v[4 * h + 2] * inv, v[4 * h + 3] * inv), __NV_SATFINITE, __NV_E4M3);
      packed[h] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
    }
    dst[c] = make_uint2(packed[0], packed[1]);
  }
}

}  // namespace

void quantize_rows_e4m3(const uint16_t* x, int64_t rows, int64_t cols, int64_t ld_x, uint8_t* out, float* scales,
                        CUstream_st* stream) {
  assert(cols % 8 == 0 && ld_x % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0);
  if (rows == 0) return;
  quantize_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, cols, ld_x, out, scales);
}

}  // namespace folio::cuda
