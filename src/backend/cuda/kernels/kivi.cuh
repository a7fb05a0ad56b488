// KIVI on the device (kv/kivi.h has the definition and the byte layout): the group quantizer
// the seal kernel runs, which must write kivi.cpp's bytes exactly, and the unpacking the
// attention kernels do. The quantizer spells every operation with an _rn intrinsic so that
// --use_fast_math or FMA contraction cannot change a byte; the unpacking is free to contract
// (attention is checked against float64 within a tolerance, not bit for bit).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "kv/kv_format.h"

namespace folio::cuda::detail {

// Codes of 32 consecutive values (a key channel over 32 tokens, or 32 channels of a value
// row), packed little-endian as kivi.cpp packs them: value i at bits [i * bits, (i + 1) * bits).
// 2-bit: 64 bits, 4-bit: 128 bits.
struct KiviPacked32 {
  uint32_t word[4] = {0, 0, 0, 0};
};

// Staged fp16 values that are not finite count as fp16's largest magnitude (kivi.cpp says why).
__device__ __forceinline__ float kivi_clamp(float x) {
  return fminf(fmaxf(x, -65504.0f), 65504.0f);
}

// Quantizes x[0], x[stride], ..., x[31 * stride] (fp16 bits): the codes, the group's scale and
// minimum (fp16 bits). kivi_quantize_group's arithmetic, operation for operation.
template <int kBits>
__device__ __forceinline__ KiviPacked32 kivi_quantize32(const uint16_t* x, int stride, uint16_t* scale,
                                                        uint16_t* minimum) {
  float v[kKiviGroup];
#pragma unroll
  for (int i = 0; i < kKiviGroup; ++i) v[i] = kivi_clamp(__half2float(__ushort_as_half(x[i * stride])));
  float lo = v[0], hi = v[0];
#pragma unroll
  for (int i = 1; i < kKiviGroup; ++i) {
    lo = fminf(lo, v[i]);
    hi = fmaxf(hi, v[i]);
  }
  constexpr float kLevels = static_cast<float>((1 << kBits) - 1);
  *scale = __half_as_ushort(__float2half_rn(__fdiv_rn(__fsub_rn(hi, lo), kLevels)));
  *minimum = __half_as_ushort(__float2half_rn(lo));
  const float s = __half2float(__ushort_as_half(*scale));
  const float m = __half2float(__ushort_as_half(*minimum));
  KiviPacked32 packed;
#pragma unroll
  for (int i = 0; i < kKiviGroup; ++i) {
    float q = 0.0f;
    if (s > 0.0f) q = fminf(fmaxf(rintf(__fdiv_rn(__fsub_rn(v[i], m), s)), 0.0f), kLevels);
    const int bit = i * kBits;
    packed.word[bit / 32] |= static_cast<uint32_t>(q) << (bit % 32);
  }
  return packed;
}

// Code i of a packed run starting at `packed` (any alignment).
template <int kBits>
__device__ __forceinline__ int kivi_code(const uint8_t* packed, int i) {
  constexpr int kPerByte = 8 / kBits;
  return (packed[i / kPerByte] >> ((i % kPerByte) * kBits)) & ((1 << kBits) - 1);
}

__device__ __forceinline__ float half_at(const uint8_t* p) {
  return __half2float(*reinterpret_cast<const __half*>(p));
}

}  // namespace folio::cuda::detail
