// Device helpers of the INT4 (W4A16) kernels (int4_gemm.cu): unpacking the
// 4-bit layout of quant/int4_groups.h into BF16 MMA operands, and the BF16 MMA itself.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace folio::cuda {

constexpr int kInt4GroupShift = 5;  // 32 columns per (scale, min)

__device__ __forceinline__ uint32_t bits(__nv_bfloat162 v) {
  return *reinterpret_cast<uint32_t*>(&v);
}
__device__ __forceinline__ __nv_bfloat162 bf16x2(uint32_t v) {
  return *reinterpret_cast<__nv_bfloat162*>(&v);
}

// Columns (c + 2j, c + 2j + 1) of a codes word as BF16 weights scale * q + min: the 4-bit values
// land in BF16 128 + q (exponent of 128, q in the low mantissa bits), 128 is subtracted exactly
// and one fused multiply-add rounds the weight once.
__device__ __forceinline__ uint32_t dequantize_pair(uint32_t word, int j, __nv_bfloat162 scale, __nv_bfloat162 min) {
  const uint32_t biased = ((word >> (4 * j)) & 0x000f000fu) | 0x43004300u;
  const __nv_bfloat162 q = __hsub2(bf16x2(biased), bf16x2(0x43004300u));
  return bits(__hfma2(q, scale, min));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

struct Groups {
  __nv_bfloat162 scale, min;
};
__device__ __forceinline__ Groups split(uint32_t group) {
  const uint32_t s = group & 0xffffu, m = group >> 16;
  return {bf16x2(s | (s << 16)), bf16x2(m | (m << 16))};
}

// A thread's A fragments of one 64-column chunk (int4_gemm.h's slot assignment): codes words
// lo (row g) and hi (row g + 8), 8 columns each; a[i][h] are a0..a3 of the chunk's MMA (word i,
// half h), columns 16t + 8i + 4h .. + 3 of the chunk.
__device__ __forceinline__ void dequantize_fragments(const uint2 lo, const uint2 hi, uint32_t lo_group,
                                                     uint32_t hi_group, uint32_t (&a)[2][2][4]) {
  const Groups lo_g = split(lo_group), hi_g = split(hi_group);
  const uint32_t lo_words[2] = {lo.x, lo.y}, hi_words[2] = {hi.x, hi.y};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      a[i][h][0] = dequantize_pair(lo_words[i], 2 * h, lo_g.scale, lo_g.min);
      a[i][h][1] = dequantize_pair(hi_words[i], 2 * h, hi_g.scale, hi_g.min);
      a[i][h][2] = dequantize_pair(lo_words[i], 2 * h + 1, lo_g.scale, lo_g.min);
      a[i][h][3] = dequantize_pair(hi_words[i], 2 * h + 1, hi_g.scale, hi_g.min);
    }
  }
}

}  // namespace folio::cuda
