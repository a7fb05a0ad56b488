#include "quant/int8_groups.h"

#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "quant/block_formats.h"

namespace folio::quant {
namespace {

constexpr int64_t kChunk = 256;  // one K-quant super-block, eight 32-element blocks
constexpr int64_t kSub = 16;     // the finest group: Q6_K's sub-block
constexpr int64_t kSubs = kChunk / kSub;

// A chunk of one row as codes and a (scale, min) per 16 columns, whatever the type.
struct Unpacked {
  uint8_t q[kChunk];
  float scale[kSubs], min[kSubs];
};

// Fills u for the n columns (a multiple of the type's block) of the row starting at column c0.
void unpack_chunk(DType type, const void* src, int64_t c0, int64_t n, Unpacked& u) {
  auto both_halves = [&](int64_t block32, float scale, float min) {
    u.scale[2 * block32] = u.scale[2 * block32 + 1] = scale;
    u.min[2 * block32] = u.min[2 * block32 + 1] = min;
  };
  switch (type) {
    case DType::Q4_K:
    case DType::Q5_K: {
      const uint8_t* qs = nullptr;
      const uint8_t* qh = nullptr;
      const uint8_t* packed_scales = nullptr;
      uint16_t d_bits = 0, dmin_bits = 0;
      if (type == DType::Q4_K) {
        const auto& b = static_cast<const BlockQ4_K*>(src)[c0 / kChunk];
        qs = b.qs, packed_scales = b.scales, d_bits = b.d, dmin_bits = b.dmin;
      } else {
        const auto& b = static_cast<const BlockQ5_K*>(src)[c0 / kChunk];
        qs = b.qs, qh = b.qh, packed_scales = b.scales, d_bits = b.d, dmin_bits = b.dmin;
      }
      unpack_q45k(qs, qh, u.q);
      uint8_t sc[8], m[8];
      unpack_q4k_scales(packed_scales, sc, m);
      const float d = fp16_to_fp32(d_bits), dmin = fp16_to_fp32(dmin_bits);
      for (int j = 0; j < 8; ++j) both_halves(j, d * static_cast<float>(sc[j]), -dmin * static_cast<float>(m[j]));
      return;
    }
    case DType::Q6_K: {
      const auto& b = static_cast<const BlockQ6_K*>(src)[c0 / kChunk];
      int8_t q[kChunk];
      unpack_q6k(b, q);
      for (int64_t i = 0; i < kChunk; ++i) u.q[i] = static_cast<uint8_t>(q[i] + 32);
      const float d = fp16_to_fp32(b.d);
      for (int j = 0; j < kSubs; ++j) {
        u.scale[j] = d * static_cast<float>(b.scales[j]);
        u.min[j] = -32.0f * u.scale[j];
      }
      return;
    }
    default: break;
  }
  for (int64_t g = 0; g < n / 32; ++g) {
    const int64_t block = c0 / 32 + g;
    uint8_t* q = u.q + 32 * g;
    switch (type) {
      case DType::Q8_0: {
        const auto& b = static_cast<const BlockQ8_0*>(src)[block];
        for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(b.qs[l] + 128);
        const float d = fp16_to_fp32(b.d);
        both_halves(g, d, -128.0f * d);
        break;
      }
      case DType::Q5_0:
      case DType::Q5_1: {
        int values[32];
        float d = 0.0f, min = 0.0f;
        if (type == DType::Q5_0) {
          const auto& b = static_cast<const BlockQ5_0*>(src)[block];
          unpack_q5(b.qs, b.qh, values);
          d = fp16_to_fp32(b.d);
          min = -16.0f * d;
        } else {
          const auto& b = static_cast<const BlockQ5_1*>(src)[block];
          unpack_q5(b.qs, b.qh, values);
          d = fp16_to_fp32(b.d);
          min = fp16_to_fp32(b.m);
        }
        for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(values[l]);
        both_halves(g, d, min);
        break;
      }
      default: {  // Q4_0, Q4_1
        const uint8_t* qs = nullptr;
        float d = 0.0f, min = 0.0f;
        if (type == DType::Q4_0) {
          const auto& b = static_cast<const BlockQ4_0*>(src)[block];
          qs = b.qs, d = fp16_to_fp32(b.d), min = -8.0f * d;
        } else {
          const auto& b = static_cast<const BlockQ4_1*>(src)[block];
          qs = b.qs, d = fp16_to_fp32(b.d), min = fp16_to_fp32(b.m);
        }
        for (int l = 0; l < 16; ++l) {
          q[l] = qs[l] & 0x0f;
          q[16 + l] = qs[l] >> 4;
        }
        both_halves(g, d, min);
        break;
      }
    }
  }
}

}  // namespace

bool int8_repackable(DType type) {
  switch (type) {
    case DType::Q8_0:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q4_K: return true;
    default: return false;
  }
}

int64_t int8_group_cols(DType type) {
  return type == DType::Q6_K ? kSub : 2 * kSub;
}

void pack_int8_row(const uint8_t* q, const float* scales, const float* mins, int64_t cols, int64_t group_cols,
                   uint8_t* codes, uint32_t* groups) {
  std::memcpy(codes, q, static_cast<size_t>(cols));
  for (int64_t g = 0; g < cols / group_cols; ++g) {
    groups[g] = static_cast<uint32_t>(fp32_to_bf16(scales[g])) | (static_cast<uint32_t>(fp32_to_bf16(mins[g])) << 16);
  }
}

void repack_int8_row(DType type, const void* src, int64_t cols, int64_t group_cols, uint8_t* codes, uint32_t* groups) {
  Unpacked u;
  const int64_t step = group_cols / kSub;  // 16-column entries per group
  float scales[kSubs], mins[kSubs];
  for (int64_t c0 = 0; c0 < cols; c0 += kChunk) {
    const int64_t n = cols - c0 < kChunk ? cols - c0 : kChunk;
    unpack_chunk(type, src, c0, n, u);
    for (int64_t g = 0; g < n / group_cols; ++g) {
      scales[g] = u.scale[g * step];
      mins[g] = u.min[g * step];
    }
    pack_int8_row(u.q, scales, mins, n, group_cols, codes + c0, groups + c0 / group_cols);
  }
}

void dequantize_int8_row(const uint8_t* codes, const uint32_t* groups, int64_t cols, int64_t group_cols, float* out) {
  for (int64_t c = 0; c < cols; ++c) {
    const uint32_t group = groups[c / group_cols];
    const float scale = bf16_to_fp32(static_cast<uint16_t>(group & 0xffff));
    const float min = bf16_to_fp32(static_cast<uint16_t>(group >> 16));
    out[c] = bf16_to_fp32(fp32_to_bf16(std::fmaf(static_cast<float>(codes[c]), scale, min)));
  }
}

}  // namespace folio::quant
