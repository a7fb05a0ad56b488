#include "quant/quantize_search.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/fp16.h"
#include "quant/block_formats.h"
#include "quant/formats.h"
#include "quant/kquant_pack.h"

namespace folio::quant {
namespace {

int nearest_clamped(float v, int lo, int hi) {
  return std::clamp(static_cast<int>(std::lround(v)), lo, hi);
}

void element_weights(const float* x, const float* importance, int count, float* w) {
  if (importance != nullptr) {
    for (int i = 0; i < count; ++i) w[i] = std::max(importance[i], 0.0f) + 1e-12f;
    return;
  }
  double squares = 0.0;
  for (int i = 0; i < count; ++i) squares += static_cast<double>(x[i]) * x[i];
  const auto rms = static_cast<float>(std::sqrt(squares / count));
  for (int i = 0; i < count; ++i) w[i] = std::fabs(x[i]) + rms + 1e-12f;
}

// x ~ scale * q + offset with q in [0, max_q]; K-quants store -offset >= 0 (nonpositive_offset),
// Q4_1 / Q5_1 any offset: candidate scales around (max - min) / max_q, each with its codes'
// weighted least-squares fit.
void fit_affine(const float* x, const float* w, int count, int max_q, float* best_scale, float* best_offset,
                bool nonpositive_offset = true) {
  float lo = *std::min_element(x, x + count), hi = *std::max_element(x, x + count);
  if (nonpositive_offset) lo = std::min(lo, 0.0f);
  *best_scale = (hi - lo) / static_cast<float>(max_q);
  *best_offset = lo;
  if (!(hi > lo)) {
    *best_scale = 0.0f;
    return;
  }
  auto error_of = [&](float scale, float offset) {
    double e = 0.0;
    for (int i = 0; i < count; ++i) {
      const int q = scale > 0.0f ? nearest_clamped((x[i] - offset) / scale, 0, max_q) : 0;
      const double diff = x[i] - (scale * static_cast<float>(q) + offset);
      e += w[i] * diff * diff;
    }
    return e;
  };
  double best = error_of(*best_scale, *best_offset);
  for (int step = -10; step <= 10; ++step) {
    const float inverse = (static_cast<float>(max_q) + 0.1f * static_cast<float>(step)) / (hi - lo);
    int q[256];
    double sw = 0, swq = 0, swqq = 0, swx = 0, swqx = 0;
    for (int i = 0; i < count; ++i) {
      q[i] = nearest_clamped((x[i] - lo) * inverse, 0, max_q);
      sw += w[i];
      swq += w[i] * q[i];
      swqq += w[i] * q[i] * q[i];
      swx += w[i] * x[i];
      swqx += w[i] * q[i] * x[i];
    }
    const double det = sw * swqq - swq * swq;
    if (det <= 0.0) continue;
    double scale = (sw * swqx - swq * swx) / det;
    double offset = (swqq * swx - swq * swqx) / det;
    if (nonpositive_offset && offset > 0.0) {  // the format has no positive offset: refit the scale alone
      offset = 0.0;
      scale = swqq > 0.0 ? swqx / swqq : 0.0;
    }
    if (scale <= 0.0) continue;
    const double e = error_of(static_cast<float>(scale), static_cast<float>(offset));
    if (e < best) {
      best = e;
      *best_scale = static_cast<float>(scale);
      *best_offset = static_cast<float>(offset);
    }
  }
}

// x ~ scale * q with q in [low, -low - 1] (Q6_K: -32..31, Q5_0: -16..15, Q4_0: -8..7):
// candidates around the largest magnitude mapping to `low` (the range's longer side), each refit
// by least squares.
float fit_symmetric(const float* x, const float* w, int count, int low = -32) {
  const int high = -low - 1;
  float amax = 0.0f, signed_max = 0.0f;
  for (int i = 0; i < count; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      signed_max = x[i];
    }
  }
  if (amax == 0.0f) return 0.0f;
  auto error_of = [&](float scale) {
    double e = 0.0;
    for (int i = 0; i < count; ++i) {
      const double diff = x[i] - scale * static_cast<float>(nearest_clamped(x[i] / scale, low, high));
      e += w[i] * diff * diff;
    }
    return e;
  };
  const auto lowf = static_cast<float>(low);
  float best_scale = signed_max / lowf;
  double best = error_of(best_scale);
  for (int step = -9; step <= 9; ++step) {
    const float candidate = signed_max / (lowf + 0.1f * static_cast<float>(step));
    double swqq = 0.0, swqx = 0.0;
    for (int i = 0; i < count; ++i) {
      const int q = nearest_clamped(x[i] / candidate, low, high);
      swqq += w[i] * q * q;
      swqx += w[i] * q * x[i];
    }
    if (swqq <= 0.0) continue;
    const auto scale = static_cast<float>(swqx / swqq);
    if (scale == 0.0f) continue;
    const double e = error_of(scale);
    if (e < best) {
      best = e;
      best_scale = scale;
    }
  }
  return best_scale;
}

template <class Block>
void quantize_q45k(const float* src, void* dst, int64_t n, int max_q, const float* importance) {
  auto* y = static_cast<Block*>(dst);
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const float* x = src + b * kQKK;
    float w[kQKK], scale[8], offset[8];
    float max_scale = 0.0f, max_offset = 0.0f;
    for (int j = 0; j < 8; ++j) {
      element_weights(x + 32 * j, importance != nullptr ? importance + b * kQKK + 32 * j : nullptr, 32, w + 32 * j);
      fit_affine(x + 32 * j, w + 32 * j, 32, max_q, &scale[j], &offset[j]);
      max_scale = std::max(max_scale, scale[j]);
      max_offset = std::max(max_offset, -offset[j]);
    }
    y[b].d = fp32_to_fp16(max_scale / 63.0f);
    y[b].dmin = fp32_to_fp16(max_offset / 63.0f);
    const float d = fp16_to_fp32(y[b].d), dmin = fp16_to_fp32(y[b].dmin);
    uint8_t sc[8], m[8], q[kQKK];
    for (int j = 0; j < 8; ++j) {
      sc[j] = static_cast<uint8_t>(d > 0.0f ? nearest_clamped(scale[j] / d, 0, 63) : 0);
      m[j] = static_cast<uint8_t>(dmin > 0.0f ? nearest_clamped(-offset[j] / dmin, 0, 63) : 0);
      // The codes for the scales as stored (6-bit), not as fitted.
      const float step = d * static_cast<float>(sc[j]), shift = dmin * static_cast<float>(m[j]);
      for (int l = 0; l < 32; ++l) {
        q[32 * j + l] =
            static_cast<uint8_t>(step > 0.0f ? nearest_clamped((x[32 * j + l] + shift) / step, 0, max_q) : 0);
      }
    }
    pack_q4k_scales(sc, m, y[b].scales);
    if constexpr (sizeof(Block) == sizeof(BlockQ5_K)) {
      pack_q45k_values(q, y[b].qs, y[b].qh);
    } else {
      pack_q45k_values(q, y[b].qs, nullptr);
    }
  }
}

void quantize_q6k(const float* src, void* dst, int64_t n, const float* importance) {
  auto* y = static_cast<BlockQ6_K*>(dst);
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const float* x = src + b * kQKK;
    float w[kQKK], scale[16];
    float max_scale = 0.0f;
    for (int j = 0; j < 16; ++j) {
      element_weights(x + 16 * j, importance != nullptr ? importance + b * kQKK + 16 * j : nullptr, 16, w + 16 * j);
      scale[j] = fit_symmetric(x + 16 * j, w + 16 * j, 16);
      max_scale = std::max(max_scale, std::fabs(scale[j]));
    }
    y[b].d = fp32_to_fp16(max_scale / 127.0f);
    const float d = fp16_to_fp32(y[b].d);
    uint8_t q[kQKK];
    for (int j = 0; j < 16; ++j) {
      const int sc = d > 0.0f ? nearest_clamped(scale[j] / d, -128, 127) : 0;
      y[b].scales[j] = static_cast<int8_t>(sc);
      const float step = d * static_cast<float>(sc);
      for (int l = 0; l < 16; ++l) {
        q[16 * j + l] = static_cast<uint8_t>((step != 0.0f ? nearest_clamped(x[16 * j + l] / step, -32, 31) : 0) + 32);
      }
    }
    pack_q6k_values(q, y[b].ql, y[b].qh);
  }
}

// The 32-element types: Q4_0 / Q5_0 (x = d * (q - L/2)) and Q4_1 / Q5_1 (x = d * q + m), the
// fitted scale and min stored in fp16 and the codes rounded for the stored values.
template <class Block>
void quantize_blocks_32(const float* src, void* dst, int64_t n, const float* importance) {
  constexpr bool kAffine = std::is_same_v<Block, BlockQ4_1> || std::is_same_v<Block, BlockQ5_1>;
  constexpr bool kFiveBits = std::is_same_v<Block, BlockQ5_0> || std::is_same_v<Block, BlockQ5_1>;
  constexpr int kLevels = kFiveBits ? 32 : 16;
  auto* y = static_cast<Block*>(dst);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* x = src + b * kQK;
    float w[kQK];
    element_weights(x, importance != nullptr ? importance + b * kQK : nullptr, kQK, w);
    uint8_t q[kQK];
    if constexpr (kAffine) {
      float scale = 0.0f, offset = 0.0f;
      fit_affine(x, w, kQK, kLevels - 1, &scale, &offset, /*nonpositive_offset=*/false);
      y[b].d = fp32_to_fp16(scale);
      y[b].m = fp32_to_fp16(offset);
      const float d = fp16_to_fp32(y[b].d), m = fp16_to_fp32(y[b].m);
      for (int j = 0; j < kQK; ++j) {
        q[j] = static_cast<uint8_t>(d > 0.0f ? nearest_clamped((x[j] - m) / d, 0, kLevels - 1) : 0);
      }
    } else {
      y[b].d = fp32_to_fp16(fit_symmetric(x, w, kQK, -kLevels / 2));
      const float d = fp16_to_fp32(y[b].d);
      for (int j = 0; j < kQK; ++j) {
        q[j] = static_cast<uint8_t>((d != 0.0f ? nearest_clamped(x[j] / d, -kLevels / 2, kLevels / 2 - 1) : 0) +
                                    kLevels / 2);
      }
    }
    for (int j = 0; j < 16; ++j) y[b].qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
    if constexpr (kFiveBits) {
      uint32_t qh = 0;
      for (int j = 0; j < kQK; ++j) qh |= static_cast<uint32_t>(q[j] >> 4) << j;
      std::memcpy(y[b].qh, &qh, sizeof qh);
    }
  }
}

}  // namespace

bool quantize_row_searched(DType type, const float* src, void* dst, int64_t n, const float* importance) {
  switch (type) {
    case DType::Q4_K: quantize_q45k<BlockQ4_K>(src, dst, n, 15, importance); return true;
    case DType::Q5_K: quantize_q45k<BlockQ5_K>(src, dst, n, 31, importance); return true;
    case DType::Q6_K: quantize_q6k(src, dst, n, importance); return true;
    // Without an importance matrix the 32-element types keep round-to-nearest from min/max: on the
    // default model the search's clipping of the largest values cost +1.9% perplexity in Q4_K_M
    // (its Q5_0 tensors), while with one it gains (docs/BENCHMARKS.md, issue 13).
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
      if (importance == nullptr) return quantize_row_reference(type, src, dst, n);
      break;
    default: return quantize_row_reference(type, src, dst, n);
  }
  switch (type) {
    case DType::Q4_0: quantize_blocks_32<BlockQ4_0>(src, dst, n, importance); return true;
    case DType::Q4_1: quantize_blocks_32<BlockQ4_1>(src, dst, n, importance); return true;
    case DType::Q5_0: quantize_blocks_32<BlockQ5_0>(src, dst, n, importance); return true;
    case DType::Q5_1: quantize_blocks_32<BlockQ5_1>(src, dst, n, importance); return true;
    default: return quantize_row_reference(type, src, dst, n);
  }
}

}  // namespace folio::quant
