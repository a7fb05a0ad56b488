// Device helpers the weight-streaming kernels share (gemv.cu, fp8_small_gemm.cu, int4_gemm.cu,
// fp8_rows.cu): streaming loads of weights and BF16 unpacking.
#pragma once

#include <cstdint>

namespace folio::cuda {

// Weights are read once: streaming loads that do not displace the activations from L1.
__device__ __forceinline__ uint4 load_streaming(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

__device__ __forceinline__ uint2 load_streaming8(const void* p) {
  uint2 v;
  asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}

// Eight BF16 values (one 16-byte load) widened to floats, exactly.
__device__ __forceinline__ void unpack_bf16x8(const uint4 v, float (&out)[8]) {
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __uint_as_float(words[i] << 16);
    out[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
  }
}

}  // namespace folio::cuda
