// Scalar dequantizers of every weight and activation format. These are the ground truth the SIMD
// and CUDA paths are tested against: they follow the GGUF formulas operation by operation
// (keep_rounded stops a * b + c from becoming a fused multiply-add), so faster dequantizers can
// match them bit for bit. K-quants: x = (d * sc) * q - (dmin * m) for Q4_K / Q5_K and
// x = (d * sc) * q for Q6_K.
#include <cstring>

#include "core/fp16.h"
#include "quant/block_formats.h"
#include "quant/float_rounding.h"
#include "quant/formats.h"

namespace folio::quant {
namespace {

float half(uint16_t bits) {
  return fp16_to_fp32(bits);
}

void dequantize_row_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void dequantize_row_f16(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(x[i]);
}

void dequantize_row_bf16(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(x[i]);
}

void dequantize_row_q4_0(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ4_0*>(src);
  for (int64_t b = 0; b < n / kQK; ++b, dst += kQK) {
    const float d = half(x[b].d);
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>((x[b].qs[j] & 0x0f) - 8);
      dst[j + 16] = d * static_cast<float>((x[b].qs[j] >> 4) - 8);
    }
  }
}

void dequantize_row_q4_1(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ4_1*>(src);
  for (int64_t b = 0; b < n / kQK; ++b, dst += kQK) {
    const float d = half(x[b].d);
    const float m = half(x[b].m);
    for (int j = 0; j < 16; ++j) {
      dst[j] = keep_rounded(d * static_cast<float>(x[b].qs[j] & 0x0f)) + m;
      dst[j + 16] = keep_rounded(d * static_cast<float>(x[b].qs[j] >> 4)) + m;
    }
  }
}

void dequantize_row_q5_0(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ5_0*>(src);
  for (int64_t b = 0; b < n / kQK; ++b, dst += kQK) {
    const float d = half(x[b].d);
    int q[kQK];
    unpack_q5(x[b].qs, x[b].qh, q);
    for (int j = 0; j < kQK; ++j) dst[j] = d * static_cast<float>(q[j] - 16);
  }
}

void dequantize_row_q5_1(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ5_1*>(src);
  for (int64_t b = 0; b < n / kQK; ++b, dst += kQK) {
    const float d = half(x[b].d);
    const float m = half(x[b].m);
    int q[kQK];
    unpack_q5(x[b].qs, x[b].qh, q);
    for (int j = 0; j < kQK; ++j) dst[j] = keep_rounded(d * static_cast<float>(q[j])) + m;
  }
}

void dequantize_row_q8_0(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ8_0*>(src);
  for (int64_t b = 0; b < n / kQK; ++b, dst += kQK) {
    const float d = half(x[b].d);
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(x[b].qs[j]) * d;
  }
}

void dequantize_row_q8_1(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ8_1*>(src);
  for (int64_t b = 0; b < n / kQK; ++b, dst += kQK) {
    const float d = half(x[b].d);
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(x[b].qs[j]) * d;
  }
}

void dequantize_q45k_block(uint16_t d_bits, uint16_t dmin_bits, const uint8_t* scales, const uint8_t* q, float* dst) {
  uint8_t sc[8], m[8];
  unpack_q4k_scales(scales, sc, m);
  const float d = half(d_bits);
  const float dmin = half(dmin_bits);
  for (int j = 0; j < 8; ++j) {
    const float scale = d * static_cast<float>(sc[j]);
    const float offset = dmin * static_cast<float>(m[j]);
    for (int l = 0; l < 32; ++l) {
      dst[32 * j + l] = keep_rounded(scale * static_cast<float>(q[32 * j + l])) - offset;
    }
  }
}

void dequantize_row_q4_k(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ4_K*>(src);
  for (int64_t b = 0; b < n / kQKK; ++b, dst += kQKK) {
    uint8_t q[kQKK];
    unpack_q45k(x[b].qs, nullptr, q);
    dequantize_q45k_block(x[b].d, x[b].dmin, x[b].scales, q, dst);
  }
}

void dequantize_row_q5_k(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ5_K*>(src);
  for (int64_t b = 0; b < n / kQKK; ++b, dst += kQKK) {
    uint8_t q[kQKK];
    unpack_q45k(x[b].qs, x[b].qh, q);
    dequantize_q45k_block(x[b].d, x[b].dmin, x[b].scales, q, dst);
  }
}

void dequantize_row_q6_k(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ6_K*>(src);
  for (int64_t b = 0; b < n / kQKK; ++b, dst += kQKK) {
    int8_t q[kQKK];
    unpack_q6k(x[b], q);
    const float d = half(x[b].d);
    for (int j = 0; j < 16; ++j) {
      const float scale = d * static_cast<float>(x[b].scales[j]);
      for (int l = 0; l < 16; ++l) dst[16 * j + l] = scale * static_cast<float>(q[16 * j + l]);
    }
  }
}

void dequantize_row_q8_k(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ8_K*>(src);
  for (int64_t b = 0; b < n / kQKK; ++b, dst += kQKK) {
    for (int j = 0; j < kQKK; ++j) dst[j] = static_cast<float>(x[b].qs[j]) * x[b].d;
  }
}

}  // namespace

bool is_weight_format(DType type) {
  switch (type) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return true;
    default: return false;
  }
}

DType activation_format(DType weight_type) {
  switch (weight_type) {
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0: return DType::Q8_0;
    case DType::Q4_1:
    case DType::Q5_1: return DType::Q8_1;
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return DType::Q8_K;
    default: return DType::F32;
  }
}

DequantizeRowFn dequantizer(DType type) {
  switch (type) {
    case DType::F32: return dequantize_row_f32;
    case DType::F16: return dequantize_row_f16;
    case DType::BF16: return dequantize_row_bf16;
    case DType::Q4_0: return dequantize_row_q4_0;
    case DType::Q4_1: return dequantize_row_q4_1;
    case DType::Q5_0: return dequantize_row_q5_0;
    case DType::Q5_1: return dequantize_row_q5_1;
    case DType::Q8_0: return dequantize_row_q8_0;
    case DType::Q8_1: return dequantize_row_q8_1;
    case DType::Q4_K: return dequantize_row_q4_k;
    case DType::Q5_K: return dequantize_row_q5_k;
    case DType::Q6_K: return dequantize_row_q6_k;
    case DType::Q8_K: return dequantize_row_q8_k;
    default: return nullptr;
  }
}

bool dequantize_row(DType type, const void* src, float* dst, int64_t n) {
  const DequantizeRowFn fn = dequantizer(type);
  if (fn == nullptr) return false;
  fn(src, dst, n);
  return true;
}

}  // namespace folio::quant
