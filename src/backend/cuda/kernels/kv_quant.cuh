// The quantized KV formats on the device (kv/kv_format.h, kv/kv_quant.h): the write side that
// the rope/K-V kernel uses, and the unpacking the attention kernels do in registers. The
// arithmetic is kv_quant.h's exactly, with the _rn intrinsics so that --use_fast_math or FMA
// contraction cannot change a byte: scale = amax / M, inv = M / amax (IEEE division), each
// value x * inv rounded to E4M3 (nearest even, saturating) or to an integer in [-127, 127].
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "kv/kv_format.h"

namespace folio::cuda::detail {

// (scale, inv) of a row whose absolute maximum is amax.
__device__ __forceinline__ float2 kv_row_scale(KvFormat format, float amax) {
  const float max_q = format == KvFormat::kFp8E4M3 ? kFp8E4M3Max : kInt8Max;
  if (!(amax > 0.0f)) return make_float2(0.0f, 0.0f);
  return make_float2(__fdiv_rn(amax, max_q), __fdiv_rn(max_q, amax));
}

__device__ __forceinline__ uint8_t kv_quantize_value(KvFormat format, float x, float inv) {
  const float y = __fmul_rn(x, inv);
  if (format == KvFormat::kFp8E4M3) {
    return static_cast<uint8_t>(__nv_cvt_float_to_fp8(y, __NV_SATFINITE, __NV_E4M3));
  }
  const int q = min(127, max(-127, __float2int_rn(y)));
  return static_cast<uint8_t>(static_cast<int8_t>(q));
}

// Eight stored values (one 8-byte word) -> eight floats of the format's values (not yet scaled;
// every E4M3 value is exact in fp16, so the half step loses nothing).
__device__ __forceinline__ void kv_unpack8(KvFormat format, const uint2& word, float (&out)[8]) {
  const uint32_t words[2] = {word.x, word.y};
  if (format == KvFormat::kFp8E4M3) {
#pragma unroll
    for (int w = 0; w < 2; ++w) {
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        const __nv_fp8x2_storage_t pair = static_cast<__nv_fp8x2_storage_t>((words[w] >> (16 * p)) & 0xffffu);
        const __half2_raw raw = __nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3);
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&raw));
        out[4 * w + 2 * p] = f.x;
        out[4 * w + 2 * p + 1] = f.y;
      }
    }
  } else {
    // int8 -> float without the slow conversion unit: bias each byte to u = b + 128, put it in
    // the low mantissa byte of 2^23 (0x4B0000uu is exactly 2^23 + u), subtract 2^23 + 128.
    // One byte permute and one add per value, both exact.
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      const uint32_t biased = words[w] ^ 0x80808080u;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint32_t bits = __byte_perm(biased, 0x4B000000u, 0x7540u + i);
        out[4 * w + i] = __uint_as_float(bits) - 8388736.0f;
      }
    }
  }
}

// Eight stored values (one 8-byte word) -> eight fp16, unscaled, as four half2 words: exact, as
// every E4M3 value and every int8 is an fp16. Two values an instruction for E4M3 (the packed
// conversion); int8 biased to u = b + 128 and placed in the low mantissa byte of 1024.0 (0x64uu is
// 1024 + u), then 1152 subtracted from both halves at once.
__device__ __forceinline__ uint4 kv_to_half8(KvFormat format, const uint2& word) {
  const uint32_t words[2] = {word.x, word.y};
  uint32_t out[4];
  if (format == KvFormat::kFp8E4M3) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const auto pair = static_cast<__nv_fp8x2_storage_t>((words[i / 2] >> (16 * (i % 2))) & 0xffffu);
      const __half2_raw raw = __nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3);
      out[i] = static_cast<uint32_t>(raw.x) | (static_cast<uint32_t>(raw.y) << 16);
    }
  } else {
    const __half2 offset = __halves2half2(__ushort_as_half(0x6480), __ushort_as_half(0x6480));  // 1152
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      const uint32_t biased = words[w] ^ 0x80808080u;
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        const uint32_t bits = __byte_perm(biased, 0x64646464u, p == 0 ? 0x5140u : 0x5342u);
        const __half2 h = __hsub2(*reinterpret_cast<const __half2*>(&bits), offset);
        out[2 * w + p] = *reinterpret_cast<const uint32_t*>(&h);
      }
    }
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

// Sixteen stored values (one 16-byte chunk) -> sixteen floats.
__device__ __forceinline__ void kv_unpack16(KvFormat format, const uint4& chunk, float (&out)[16]) {
  float lo[8], hi[8];
  kv_unpack8(format, make_uint2(chunk.x, chunk.y), lo);
  kv_unpack8(format, make_uint2(chunk.z, chunk.w), hi);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    out[i] = lo[i];
    out[8 + i] = hi[i];
  }
}

}  // namespace folio::cuda::detail
