#include "backend/cuda/gemv.h"

#include <cassert>

namespace folio::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

__device__ __forceinline__ void unpack_bf16x8(const uint4 v, float (&out)[8]) {
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __uint_as_float(words[i] << 16);
    out[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
  }
}

// Weights are read once: a streaming load that does not displace x from L1.
__device__ __forceinline__ uint4 load_streaming(const uint4* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

template <int N>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gemv_kernel(const uint16_t* __restrict__ x, const uint16_t* __restrict__ w, float* __restrict__ y, int64_t m,
                int64_t k, float beta) {
  const int lane = threadIdx.x % 32;
  const int64_t feature = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (feature >= m) return;
  const auto* w_row = reinterpret_cast<const uint4*>(w + feature * k);
  const int64_t chunks = k / 8;  // 8 bf16 per 16-byte chunk
  float acc[N];
#pragma unroll
  for (int r = 0; r < N; ++r) acc[r] = 0.0f;
  // Four weight chunks in flight per lane before any arithmetic: enough outstanding loads
  // per SM to cover memory latency at full bandwidth.
  constexpr int kUnroll = 4;
  auto accumulate = [&](const uint4 weights, int64_t c) {
    float wf[8];
    unpack_bf16x8(weights, wf);
#pragma unroll
    for (int r = 0; r < N; ++r) {
      float xf[8];
      unpack_bf16x8(__ldg(reinterpret_cast<const uint4*>(x + r * k) + c), xf);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[r] = fmaf(wf[i], xf[i], acc[r]);
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
#pragma unroll
    for (int r = 0; r < N; ++r) {
      float* out = y + r * m + feature;
      *out = beta == 0.0f ? acc[r] : acc[r] + beta * *out;
    }
  }
}

template <int N>
void launch(const void* x, const void* w, float* y, int64_t m, int64_t k, float beta, CUstream_st* stream) {
  const auto blocks = static_cast<unsigned>((m + kWarpsPerBlock - 1) / kWarpsPerBlock);
  gemv_kernel<N><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(static_cast<const uint16_t*>(x),
                                                             static_cast<const uint16_t*>(w), y, m, k, beta);
}

}  // namespace

bool gemv_supports(const void* x, const void* w, int64_t n, int64_t k) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return n >= 1 && n <= kGemvMaxRows && k % 8 == 0 && aligned(x) && aligned(w);
}

void bf16_gemv(const void* x, const void* w, float* y, int64_t n, int64_t m, int64_t k, float beta,
               CUstream_st* stream) {
  assert(gemv_supports(x, w, n, k));
  switch (n) {
    case 1: launch<1>(x, w, y, m, k, beta, stream); break;
    case 2: launch<2>(x, w, y, m, k, beta, stream); break;
    case 3: launch<3>(x, w, y, m, k, beta, stream); break;
    case 4: launch<4>(x, w, y, m, k, beta, stream); break;
    case 5: launch<5>(x, w, y, m, k, beta, stream); break;
    case 6: launch<6>(x, w, y, m, k, beta, stream); break;
    case 7: launch<7>(x, w, y, m, k, beta, stream); break;
    default: launch<8>(x, w, y, m, k, beta, stream); break;
  }
}

}  // namespace folio::cuda
