#include "quant/int4_groups.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "quant/block_formats.h"

namespace folio::quant {

bool int4_repackable(DType type) {
  return type == DType::Q4_0 || type == DType::Q4_1 || type == DType::Q4_K;
}

bool pack_int4_row(const uint8_t* q, const float* scales, const float* mins, int64_t cols, uint8_t* codes,
                   uint32_t* groups, int64_t group_cols) {
  for (int64_t c = 0; c < cols; c += 8) {
    uint32_t word = 0;
    for (int j = 0; j < 4; ++j) {
      word |= static_cast<uint32_t>(q[c + 2 * j] & 0x0f) << (4 * j);
      word |= static_cast<uint32_t>(q[c + 2 * j + 1] & 0x0f) << (16 + 4 * j);
    }
    std::memcpy(codes + c / 2, &word, 4);
  }
  const int64_t blocks_per_group = group_cols / kInt4Group;
  for (int64_t b = 0; b < cols / kInt4Group; ++b) {
    const uint32_t word =
        static_cast<uint32_t>(fp32_to_bf16(scales[b])) | (static_cast<uint32_t>(fp32_to_bf16(mins[b])) << 16);
    if (b % blocks_per_group == 0) {
      groups[b / blocks_per_group] = word;
    } else if (groups[b / blocks_per_group] != word) {
      return false;
    }
  }
  return true;
}

bool repack_int4_row(DType type, const void* src, int64_t cols, uint8_t* codes, uint32_t* groups, int64_t group_cols) {
  // One Q4_K block or eight Q4_0 / Q4_1 blocks at a time, or a whole group when larger (on the
  // heap only then: the upload calls this once a row).
  constexpr int64_t kChunk = 256;
  const int64_t chunk = group_cols > kChunk ? group_cols : kChunk;
  uint8_t q_small[kChunk];
  float scales_small[kChunk / kInt4Group], mins_small[kChunk / kInt4Group];
  std::vector<uint8_t> q_large;
  std::vector<float> scales_large, mins_large;
  uint8_t* q = q_small;
  float* scales = scales_small;
  float* mins = mins_small;
  if (chunk > kChunk) {
    q_large.resize(static_cast<size_t>(chunk));
    scales_large.resize(static_cast<size_t>(chunk / kInt4Group));
    mins_large.resize(scales_large.size());
    q = q_large.data();
    scales = scales_large.data();
    mins = mins_large.data();
  }
  for (int64_t c0 = 0; c0 < cols; c0 += chunk) {
    const int64_t n = cols - c0 < chunk ? cols - c0 : chunk;
    if (type == DType::Q4_K) {
      for (int64_t k0 = 0; k0 < n; k0 += 256) {
        const auto& b = static_cast<const BlockQ4_K*>(src)[(c0 + k0) / 256];
        unpack_q45k(b.qs, nullptr, q + k0);
        uint8_t sc[8], m[8];
        unpack_q4k_scales(b.scales, sc, m);
        const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
        for (int j = 0; j < 8; ++j) {
          scales[k0 / kInt4Group + j] = d * static_cast<float>(sc[j]);
          mins[k0 / kInt4Group + j] = -dmin * static_cast<float>(m[j]);
        }
      }
    } else {
      for (int64_t g = 0; g < n / kInt4Group; ++g) {
        const int64_t block = c0 / kInt4Group + g;
        const uint8_t* qs = nullptr;
        if (type == DType::Q4_0) {
          const auto& b = static_cast<const BlockQ4_0*>(src)[block];
          scales[g] = fp16_to_fp32(b.d);
          mins[g] = -8.0f * scales[g];
          qs = b.qs;
        } else {
          const auto& b = static_cast<const BlockQ4_1*>(src)[block];
          scales[g] = fp16_to_fp32(b.d);
          mins[g] = fp16_to_fp32(b.m);
          qs = b.qs;
        }
        for (int l = 0; l < 16; ++l) {
          q[32 * g + l] = qs[l] & 0x0f;
          q[32 * g + 16 + l] = qs[l] >> 4;
        }
      }
    }
    if (!pack_int4_row(q, scales, mins, n, codes + c0 / 2, groups + c0 / group_cols, group_cols)) {
      return false;
    }
  }
  return true;
}

namespace {

// x rounded once to BF16 (nearest, ties to even), from a double holding q * scale + min exactly
// (a 4-bit integer times an 8-bit significand plus another: far fewer than 53 bits): what the
// kernels' single-rounding BF16 fma gives. Through float first would round twice.
float round_to_bf16(double x) {
  if (x == 0.0 || !std::isfinite(x)) return static_cast<float>(x);
  int exponent = 0;
  const double mantissa = std::frexp(x, &exponent);               // x = mantissa * 2^exponent, 0.5 <= |m| < 1
  const double scaled = std::nearbyint(std::ldexp(mantissa, 8));  // 8 significant bits, ties to even
  return static_cast<float>(std::ldexp(scaled, exponent - 8));
}

}  // namespace

void dequantize_int4_row(const uint8_t* codes, const uint32_t* groups, int64_t cols, float* out, int64_t group_cols) {
  for (int64_t c = 0; c < cols; c += 8) {
    uint32_t word;
    std::memcpy(&word, codes + c / 2, 4);
    const uint32_t group = groups[c / group_cols];
    const float scale = bf16_to_fp32(static_cast<uint16_t>(group & 0xffff));
    const float min = bf16_to_fp32(static_cast<uint16_t>(group >> 16));
    for (int j = 0; j < 4; ++j) {
      const float lo = static_cast<float>((word >> (4 * j)) & 0x0f);
      const float hi = static_cast<float>((word >> (16 + 4 * j)) & 0x0f);
      out[c + 2 * j] = round_to_bf16(static_cast<double>(lo) * scale + min);
      out[c + 2 * j + 1] = round_to_bf16(static_cast<double>(hi) * scale + min);
    }
  }
}

}  // namespace folio::quant
