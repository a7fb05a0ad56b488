// The Codes policies of grouped_small_gemm.cuh, grouped_wgmma_gemm.cu and the dequantization
// kernels: how the 4-bit (quant/int4_groups.h) and 8-bit (quant/int8_groups.h) layouts become
// BF16 MMA operands.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/weight_loads.cuh"

namespace folio::cuda {

__device__ __forceinline__ uint32_t bits(__nv_bfloat162 v) {
  return *reinterpret_cast<uint32_t*>(&v);
}
__device__ __forceinline__ __nv_bfloat162 bf16x2(uint32_t v) {
  return *reinterpret_cast<__nv_bfloat162*>(&v);
}

struct Groups {
  __nv_bfloat162 scale, min;
};
__device__ __forceinline__ Groups split(uint32_t group) {
  const uint32_t s = group & 0xffffu, m = group >> 16;
  return {bf16x2(s | (s << 16)), bf16x2(m | (m << 16))};
}

// Columns (c + 2j, c + 2j + 1) of a 4-bit codes word as BF16 weights scale * q + min: the
// 4-bit values land in BF16 128 + q (exponent of 128, q in the low mantissa bits), 128 is
// subtracted exactly and one fused multiply-add rounds the weight once.
__device__ __forceinline__ uint32_t dequantize_pair(uint32_t word, int j, __nv_bfloat162 scale, __nv_bfloat162 min) {
  const uint32_t biased = ((word >> (4 * j)) & 0x000f000fu) | 0x43004300u;
  const __nv_bfloat162 q = __hsub2(bf16x2(biased), bf16x2(0x43004300u));
  return bits(__hfma2(q, scale, min));
}

// Bytes j, j + 1 of an 8-bit codes word as BF16 weights bf16(fmaf(q, scale, min)): BF16 holds
// integers only to 256 with 8 significant bits, so its 4-bit trick does not stretch to 8 bits;
// in FP32 a byte placed under the exponent of 2^23 is 2^23 + q, and subtracting 2^23 is exact.
__device__ __forceinline__ uint32_t dequantize_byte_pair(uint32_t word, int j, float scale, float min) {
  const float q0 = __uint_as_float(__byte_perm(word, 0x4b000000u, 0x7440u | j)) - 8388608.0f;
  const float q1 = __uint_as_float(__byte_perm(word, 0x4b000000u, 0x7440u | (j + 1))) - 8388608.0f;
  return bits(__floats2bfloat162_rn(fmaf(q0, scale, min), fmaf(q1, scale, min)));
}

// kWords codes words of a row (lo) and of the row 8 below (hi), one group each, as MMA
// operands: MMA (i, h) takes word i's pairs 2h (a0 / a1) and 2h + 1 (a2 / a3).
template <int kWords>
__device__ __forceinline__ void dequantize_int4_words(const uint32_t (&lo_words)[kWords],
                                                      const uint32_t (&hi_words)[kWords], uint32_t lo_group,
                                                      uint32_t hi_group, uint32_t (&a)[kWords][2][4]) {
  const Groups lo_g = split(lo_group), hi_g = split(hi_group);
#pragma unroll
  for (int i = 0; i < kWords; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      a[i][h][0] = dequantize_pair(lo_words[i], 2 * h, lo_g.scale, lo_g.min);
      a[i][h][1] = dequantize_pair(hi_words[i], 2 * h, hi_g.scale, hi_g.min);
      a[i][h][2] = dequantize_pair(lo_words[i], 2 * h + 1, lo_g.scale, lo_g.min);
      a[i][h][3] = dequantize_pair(hi_words[i], 2 * h + 1, hi_g.scale, hi_g.min);
    }
  }
}

// 4 bits a weight: a thread's 16 columns of a row are two words (8 columns each, column
// c + 2j in bits 4j and c + 2j + 1 in bits 16 + 4j); MMA (i, h) takes word i's pairs 2h
// (a0 / a1) and 2h + 1 (a2 / a3).
struct Int4Codes {
  using Chunk = uint2;
  static constexpr int kColumns = 16;
  static constexpr int kChunkBytes = 32;
  static constexpr int kUnroll1 = 8, kUnroll2 = 4;
  __device__ __forceinline__ static Chunk load(const uint8_t* p) { return load_streaming8(p); }
  __device__ __forceinline__ static void dequantize(const uint2 lo, const uint2 hi, uint32_t lo_group,
                                                    uint32_t hi_group, uint32_t (&a)[2][2][4]) {
    const uint32_t lo_words[2] = {lo.x, lo.y}, hi_words[2] = {hi.x, hi.y};
    dequantize_int4_words(lo_words, hi_words, lo_group, hi_group, a);
  }

  // The wgmma GEMM (grouped_wgmma_gemm.cu): a row's 64-column chunk of codes in shared memory
  // (kSmemRowBytes apart), its group words beside (two of 32 columns, or the one of a wider
  // group). a[s] = a0..a3 of k16 step s in natural order: columns 16s + 2t, +1 (a0 lo row, a1
  // hi row) are word 2s's pair t, columns 16s + 2t + 8, +9 (a2, a3) word 2s + 1's.
  static constexpr int kSmemRowBytes = 32;
  __device__ __forceinline__ static void step_operands(const uint8_t* lo, const uint8_t* hi, const uint32_t* lo_groups,
                                                       const uint32_t* hi_groups, int t, int group_shift,
                                                       uint32_t (&a)[4][4]) {
    const uint4 l0 = *reinterpret_cast<const uint4*>(lo), l1 = *reinterpret_cast<const uint4*>(lo + 16);
    const uint4 h0 = *reinterpret_cast<const uint4*>(hi), h1 = *reinterpret_cast<const uint4*>(hi + 16);
    const int shift = 4 * t;
    const uint32_t lw[8] = {l0.x >> shift, l0.y >> shift, l0.z >> shift, l0.w >> shift,
                            l1.x >> shift, l1.y >> shift, l1.z >> shift, l1.w >> shift};
    const uint32_t hw[8] = {h0.x >> shift, h0.y >> shift, h0.z >> shift, h0.w >> shift,
                            h1.x >> shift, h1.y >> shift, h1.z >> shift, h1.w >> shift};
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const int group = group_shift == 5 ? s / 2 : 0;
      const Groups lg = split(lo_groups[group]), hg = split(hi_groups[group]);
      a[s][0] = dequantize_pair(lw[2 * s], 0, lg.scale, lg.min);
      a[s][1] = dequantize_pair(hw[2 * s], 0, hg.scale, hg.min);
      a[s][2] = dequantize_pair(lw[2 * s + 1], 0, lg.scale, lg.min);
      a[s][3] = dequantize_pair(hw[2 * s + 1], 0, hg.scale, hg.min);
    }
  }
};

// The 4-bit layout read in 128-column chunks (the small GEMM only, k % 128 == 0): a thread's 32
// columns of a row are four words, one 16-byte load (Int4Codes' 8-byte loads issue twice the
// load instructions for the same bytes), and lie in one 32-column group. MMA (i, h) takes word
// i's pairs as Int4Codes does.
struct Int4WideCodes {
  using Chunk = uint4;
  static constexpr int kColumns = 32;
  static constexpr int kChunkBytes = 64;
  static constexpr int kUnroll1 = 4, kUnroll2 = 2;
  __device__ __forceinline__ static Chunk load(const uint8_t* p) { return load_streaming(p); }
  __device__ __forceinline__ static void dequantize(const uint4 lo, const uint4 hi, uint32_t lo_group,
                                                    uint32_t hi_group, uint32_t (&a)[4][2][4]) {
    const uint32_t lo_words[4] = {lo.x, lo.y, lo.z, lo.w}, hi_words[4] = {hi.x, hi.y, hi.z, hi.w};
    dequantize_int4_words(lo_words, hi_words, lo_group, hi_group, a);
  }
};

// 8 bits a weight: a thread's 16 columns of a row are four words of 4 columns in byte order;
// MMA (i, h) takes word 2i + h, bytes 0-1 (a0 / a1) and 2-3 (a2 / a3). Half the chunks of
// Int4Codes in flight: the same bytes.
struct Int8Codes {
  using Chunk = uint4;
  static constexpr int kColumns = 16;
  static constexpr int kChunkBytes = 64;
  static constexpr int kUnroll1 = 4, kUnroll2 = 2;
  __device__ __forceinline__ static Chunk load(const uint8_t* p) { return load_streaming(p); }
  __device__ __forceinline__ static void dequantize(const uint4 lo, const uint4 hi, uint32_t lo_group,
                                                    uint32_t hi_group, uint32_t (&a)[2][2][4]) {
    const float lo_scale = __uint_as_float(lo_group << 16), lo_min = __uint_as_float(lo_group & 0xffff0000u);
    const float hi_scale = __uint_as_float(hi_group << 16), hi_min = __uint_as_float(hi_group & 0xffff0000u);
    const uint32_t lo_words[4] = {lo.x, lo.y, lo.z, lo.w}, hi_words[4] = {hi.x, hi.y, hi.z, hi.w};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        a[i][h][0] = dequantize_byte_pair(lo_words[2 * i + h], 0, lo_scale, lo_min);
        a[i][h][1] = dequantize_byte_pair(hi_words[2 * i + h], 0, hi_scale, hi_min);
        a[i][h][2] = dequantize_byte_pair(lo_words[2 * i + h], 2, lo_scale, lo_min);
        a[i][h][3] = dequantize_byte_pair(hi_words[2 * i + h], 2, hi_scale, hi_min);
      }
    }
  }

  // The wgmma GEMM, as Int4Codes::step_operands: columns 16s + 2t, +1 are bytes 2 (t % 2) of
  // word 4s + t / 2, columns 16s + 2t + 8, +9 the same bytes of word 4s + 2 + t / 2; step s's
  // group is word s >> (group_shift - 4). Rows 80 bytes apart: the 8 rows a warp reads at
  // once fall in distinct banks.
  static constexpr int kSmemRowBytes = 80;
  __device__ __forceinline__ static void step_operands(const uint8_t* lo, const uint8_t* hi, const uint32_t* lo_groups,
                                                       const uint32_t* hi_groups, int t, int group_shift,
                                                       uint32_t (&a)[4][4]) {
    const auto* lw = reinterpret_cast<const uint32_t*>(lo);
    const auto* hw = reinterpret_cast<const uint32_t*>(hi);
    const int half = t / 2, shift = 16 * (t % 2);
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const int group = s >> (group_shift - 4);
      const float lo_scale = __uint_as_float(lo_groups[group] << 16);
      const float lo_min = __uint_as_float(lo_groups[group] & 0xffff0000u);
      const float hi_scale = __uint_as_float(hi_groups[group] << 16);
      const float hi_min = __uint_as_float(hi_groups[group] & 0xffff0000u);
      a[s][0] = dequantize_byte_pair(lw[4 * s + half] >> shift, 0, lo_scale, lo_min);
      a[s][1] = dequantize_byte_pair(hw[4 * s + half] >> shift, 0, hi_scale, hi_min);
      a[s][2] = dequantize_byte_pair(lw[4 * s + 2 + half] >> shift, 0, lo_scale, lo_min);
      a[s][3] = dequantize_byte_pair(hw[4 * s + 2 + half] >> shift, 0, hi_scale, hi_min);
    }
  }
};

}  // namespace folio::cuda
