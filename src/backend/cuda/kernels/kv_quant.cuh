// The quantized KV formats on the device (kv/kv_format.h, kv/kv_quant.h): the write side that
// the rope/K-V kernel uses, and the unpacking the attention kernels do in registers. The
// arithmetic is kv_quant.h's exactly, with the _rn intrinsics so that --use_fast_math or FMA
// contraction cannot change a byte: scale = amax / M, inv = M / amax (IEEE division), each
// value x * inv rounded to E4M3 (nearest even, saturating) or to an integer in [-127, 127].
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/kernels/common.cuh"
#include "kv/kv_format.h"
#include "kv/kv_layer_view.h"

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

// One warp stores a row of head_dim values (value(d) is value d) at (slot, head) of K or V
// (base: cache.k or cache.v): absmax, scale, then the bytes and the scale at kv_layer_view.h's
// offsets. Used where rows are written (rope_write_kv) and where staged blocks are sealed.
template <class Value>
__device__ __forceinline__ void warp_store_row(const KvLayerView& cache, uint8_t* base, int64_t slot, int head,
                                               int lane, Value value) {
  float amax = 0.0f;
  for (int d = lane; d < cache.head_dim; d += 32) amax = fmaxf(amax, fabsf(value(d)));
  amax = warp_max(amax);
  const float2 scale = kv_row_scale(cache.format, amax);
  uint8_t* values = base + cache.value_offset(slot, head);
  for (int d = lane; d < cache.head_dim; d += 32) values[d] = kv_quantize_value(cache.format, value(d), scale.y);
  if (lane == 0) *reinterpret_cast<float*>(base + cache.scale_offset(slot, head)) = scale.x;
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

// Four stored values (one word) -> four fp16, unscaled, as two half2 words (bytes 0-1 in lo,
// bytes 2-3 in hi): exact, as every E4M3 value and every int8 is an fp16. Two values an
// instruction for E4M3 (the packed conversion); int8 biased to u = b + 128 and placed in the low
// mantissa byte of 1024.0 (0x64uu is 1024 + u), then 1152 subtracted from both halves at once.
__device__ __forceinline__ void kv_to_half2x2(KvFormat format, uint32_t word, uint32_t& lo, uint32_t& hi) {
  if (format == KvFormat::kFp8E4M3) {
    const __half2_raw a = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word & 0xffffu), __NV_E4M3);
    const __half2_raw b = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word >> 16), __NV_E4M3);
    lo = static_cast<uint32_t>(a.x) | (static_cast<uint32_t>(a.y) << 16);
    hi = static_cast<uint32_t>(b.x) | (static_cast<uint32_t>(b.y) << 16);
  } else {
    const __half2 offset = __halves2half2(__ushort_as_half(0x6480), __ushort_as_half(0x6480));  // 1152
    const uint32_t biased = word ^ 0x80808080u;
    const uint32_t lo_bits = __byte_perm(biased, 0x64646464u, 0x5140u);
    const uint32_t hi_bits = __byte_perm(biased, 0x64646464u, 0x5342u);
    const __half2 l = __hsub2(*reinterpret_cast<const __half2*>(&lo_bits), offset);
    const __half2 h = __hsub2(*reinterpret_cast<const __half2*>(&hi_bits), offset);
    lo = *reinterpret_cast<const uint32_t*>(&l);
    hi = *reinterpret_cast<const uint32_t*>(&h);
  }
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
