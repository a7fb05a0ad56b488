// Reference quantizers float -> block type. The 32-element types round as GGUF's reference
// quantizers do (same scale choice, same rounding), so they reproduce the bytes of files made by
// them. The K-quants use a plain min/max quantizer: per sub-block scale (and min), 6- or 8-bit
// super-block scales, nearest rounding; no search for optimal scales.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/fp16.h"
#include "quant/block_formats.h"
#include "quant/float_rounding.h"
#include "quant/formats.h"
#include "quant/kquant_pack.h"

namespace folio::quant {
namespace {

int clamp_int(int v, int lo, int hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

// The element of largest magnitude, with its sign (the first one on ties).
float signed_absmax(const float* x, int count) {
  float best = x[0];
  for (int j = 1; j < count; ++j) {
    if (std::fabs(x[j]) > std::fabs(best)) best = x[j];
  }
  return best;
}

void min_max(const float* x, int count, float* lo, float* hi) {
  *lo = x[0];
  *hi = x[0];
  for (int j = 1; j < count; ++j) {  // strict comparisons: the first of equal values wins
    if (x[j] < *lo) *lo = x[j];
    if (x[j] > *hi) *hi = x[j];
  }
}

// Symmetric 4/5-bit: d = max / -(levels/2) so that the largest magnitude maps to q = 0; q =
// trunc(x/d + levels/2 + 0.5) clipped to [0, levels - 1].
void quantize_symmetric(const float* x, int levels, uint16_t* d_bits, uint8_t* q) {
  const float max = signed_absmax(x, kQK);
  const float d = max / static_cast<float>(-levels / 2);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const float offset = static_cast<float>(levels / 2) + 0.5f;
  for (int j = 0; j < kQK; ++j) {
    q[j] = static_cast<uint8_t>(clamp_int(static_cast<int>(keep_rounded(x[j] * id) + offset), 0, levels - 1));
  }
  *d_bits = fp32_to_fp16(d);
}

// Affine 4/5-bit: d = (max - min) / (levels - 1), m = min, q = trunc((x - min)/d + 0.5).
void quantize_affine(const float* x, int levels, uint16_t* d_bits, uint16_t* m_bits, uint8_t* q) {
  float lo, hi;
  min_max(x, kQK, &lo, &hi);
  const float d = (hi - lo) / static_cast<float>(levels - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK; ++j) {
    q[j] = static_cast<uint8_t>(clamp_int(static_cast<int>(keep_rounded((x[j] - lo) * id) + 0.5f), 0, levels - 1));
  }
  *d_bits = fp32_to_fp16(d);
  *m_bits = fp32_to_fp16(lo);
}

void pack_nibbles(const uint8_t* q, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
}

void pack_high_bits(const uint8_t* q, uint8_t* qh_bytes) {
  uint32_t qh = 0;
  for (int j = 0; j < kQK; ++j) qh |= static_cast<uint32_t>(q[j] >> 4) << j;
  std::memcpy(qh_bytes, &qh, sizeof qh);
}

template <typename Block>
void quantize_blocks_32(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<Block*>(dst);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* x = src + b * kQK;
    uint8_t q[kQK];
    if constexpr (std::is_same_v<Block, BlockQ4_0>) {
      quantize_symmetric(x, 16, &y[b].d, q);
      pack_nibbles(q, y[b].qs);
    } else if constexpr (std::is_same_v<Block, BlockQ4_1>) {
      quantize_affine(x, 16, &y[b].d, &y[b].m, q);
      pack_nibbles(q, y[b].qs);
    } else if constexpr (std::is_same_v<Block, BlockQ5_0>) {
      quantize_symmetric(x, 32, &y[b].d, q);
      pack_nibbles(q, y[b].qs);
      pack_high_bits(q, y[b].qh);
    } else if constexpr (std::is_same_v<Block, BlockQ5_1>) {
      quantize_affine(x, 32, &y[b].d, &y[b].m, q);
      pack_nibbles(q, y[b].qs);
      pack_high_bits(q, y[b].qh);
    } else {
      static_assert(std::is_same_v<Block, BlockQ8_0>);
      float amax = 0.0f;
      for (int j = 0; j < kQK; ++j) amax = std::fmax(amax, std::fabs(x[j]));
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      for (int j = 0; j < kQK; ++j) y[b].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
      y[b].d = fp32_to_fp16(d);
    }
  }
}

int nearest(float x) {
  return static_cast<int>(std::lround(x));
}

// Q4_K / Q5_K: sub-block j covers [-offset_j, -offset_j + levels_1 * scale_j] with offset_j =
// -min(0, min x) >= 0; super-block scales d = max scale / 63, dmin = max offset / 63.
void quantize_q45k_block(const float* x, int max_q, uint16_t* d_bits, uint16_t* dmin_bits, uint8_t* scales,
                         uint8_t* q) {
  float scale[8], offset[8];
  float max_scale = 0.0f, max_offset = 0.0f;
  for (int j = 0; j < 8; ++j) {
    float lo, hi;
    min_max(x + 32 * j, 32, &lo, &hi);
    lo = std::fmin(lo, 0.0f);
    scale[j] = (hi - lo) / static_cast<float>(max_q);
    offset[j] = -lo;
    max_scale = std::fmax(max_scale, scale[j]);
    max_offset = std::fmax(max_offset, offset[j]);
  }
  *d_bits = fp32_to_fp16(max_scale / 63.0f);
  *dmin_bits = fp32_to_fp16(max_offset / 63.0f);
  const float d = fp16_to_fp32(*d_bits);
  const float dmin = fp16_to_fp32(*dmin_bits);
  uint8_t sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>(d > 0.0f ? clamp_int(nearest(scale[j] / d), 0, 63) : 0);
    m[j] = static_cast<uint8_t>(dmin > 0.0f ? clamp_int(nearest(offset[j] / dmin), 0, 63) : 0);
    const float step = d * static_cast<float>(sc[j]);
    const float shift = dmin * static_cast<float>(m[j]);
    for (int l = 0; l < 32; ++l) {
      const int value = step > 0.0f ? nearest((x[32 * j + l] + shift) / step) : 0;
      q[32 * j + l] = static_cast<uint8_t>(clamp_int(value, 0, max_q));
    }
  }
  pack_q4k_scales(sc, m, scales);
}

void quantize_row_q4_k(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ4_K*>(dst);
  for (int64_t b = 0; b < n / kQKK; ++b) {
    uint8_t q[kQKK];
    quantize_q45k_block(src + b * kQKK, 15, &y[b].d, &y[b].dmin, y[b].scales, q);
    pack_q45k_values(q, y[b].qs, nullptr);
  }
}

void quantize_row_q5_k(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ5_K*>(dst);
  for (int64_t b = 0; b < n / kQKK; ++b) {
    uint8_t q[kQKK];
    quantize_q45k_block(src + b * kQKK, 31, &y[b].d, &y[b].dmin, y[b].scales, q);
    pack_q45k_values(q, y[b].qs, y[b].qh);
  }
}

// Q6_K: sub-block scale_j = max_j / -32 (its largest magnitude maps to q = -32), int8 scales
// relative to d = max |scale_j| / 127.
void quantize_row_q6_k(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ6_K*>(dst);
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const float* x = src + b * kQKK;
    float scale[16];
    float max_scale = 0.0f;
    for (int j = 0; j < 16; ++j) {
      scale[j] = signed_absmax(x + 16 * j, 16) / -32.0f;
      max_scale = std::fmax(max_scale, std::fabs(scale[j]));
    }
    y[b].d = fp32_to_fp16(max_scale / 127.0f);
    const float d = fp16_to_fp32(y[b].d);
    uint8_t q[kQKK];  // q + 32, in [0, 63]
    for (int j = 0; j < 16; ++j) {
      const int sc = d > 0.0f ? clamp_int(nearest(scale[j] / d), -128, 127) : 0;
      y[b].scales[j] = static_cast<int8_t>(sc);
      const float step = d * static_cast<float>(sc);
      for (int l = 0; l < 16; ++l) {
        const int value = step != 0.0f ? nearest(x[16 * j + l] / step) : 0;
        q[16 * j + l] = static_cast<uint8_t>(clamp_int(value, -32, 31) + 32);
      }
    }
    pack_q6k_values(q, y[b].ql, y[b].qh);
  }
}

}  // namespace

bool quantize_row_reference(DType type, const float* src, void* dst, int64_t n) {
  switch (type) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return true;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = fp32_to_fp16(src[i]);
      return true;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = fp32_to_bf16(src[i]);
      return true;
    case DType::Q4_0: quantize_blocks_32<BlockQ4_0>(src, dst, n); return true;
    case DType::Q4_1: quantize_blocks_32<BlockQ4_1>(src, dst, n); return true;
    case DType::Q5_0: quantize_blocks_32<BlockQ5_0>(src, dst, n); return true;
    case DType::Q5_1: quantize_blocks_32<BlockQ5_1>(src, dst, n); return true;
    case DType::Q8_0: quantize_blocks_32<BlockQ8_0>(src, dst, n); return true;
    case DType::Q4_K: quantize_row_q4_k(src, dst, n); return true;
    case DType::Q5_K: quantize_row_q5_k(src, dst, n); return true;
    case DType::Q6_K: quantize_row_q6_k(src, dst, n); return true;
    case DType::Q8_1:
    case DType::Q8_K: activation_quantizer(type)(src, dst, n); return true;
    default: return false;
  }
}

}  // namespace folio::quant
