// Scalar reference kernels for the K-quants (Q4_K, Q5_K, Q6_K) and their activation partner
// Q8_K. Dequantization follows the GGUF formulas operation by operation: x = (d * sc) * q -
// (dmin * m) for Q4_K / Q5_K and x = (d * sc) * q for Q6_K, without fused multiply-add.
#include <cmath>
#include <cstring>

#include "backend/cpu/quant/quant_blocks.h"
#include "backend/cpu/quant/quant_internal.h"
#include "core/fp16.h"

namespace folio::cpu::quant {
namespace {

float half(uint16_t bits) { return fp16_to_fp32(bits); }

void convert_activation_row_q8_k(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const float* x = src + b * kQKK;
    float amax = 0.0f;
    for (int j = 0; j < kQKK; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < kQKK; ++j) {
      const float q = std::fmin(127.0f, std::fmax(-127.0f, round_half_even(x[j] * id)));
      y[b].qs[j] = static_cast<int8_t>(q);
    }
    for (int i = 0; i < 16; ++i) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += y[b].qs[16 * i + j];
      y[b].bsums[i] = static_cast<int16_t>(sum);
    }
    y[b].d = d;
  }
}

// The 4- or 5-bit values of a Q4_K / Q5_K block in element order (qh null for Q4_K).
void unpack_q45k(const uint8_t* qs, const uint8_t* qh, uint8_t* q) {
  for (int j = 0; j < 8; ++j) {
    const uint8_t* bytes = qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    for (int l = 0; l < 32; ++l) {
      int value = (bytes[l] >> shift) & 0x0f;
      if (qh != nullptr) value |= ((qh[l] >> j) & 1) << 4;
      q[32 * j + l] = static_cast<uint8_t>(value);
    }
  }
}

// The 6-bit values of a Q6_K block in element order, minus 32.
void unpack_q6k(const BlockQ6_K& x, int8_t* q) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = x.ql + 64 * h;
    const uint8_t* qh = x.qh + 32 * h;
    int8_t* y = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      y[l] = static_cast<int8_t>(((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32);
      y[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32);
      y[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      y[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
}

void dequantize_q45k_block(uint16_t d_bits, uint16_t dmin_bits, const uint8_t* scales,
                           const uint8_t* q, float* dst) {
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

// sum_j d*sc[j]*dot(q_j, a_j) - dmin*m[j]*sum(a_j), with exact integer parts.
float block_dot_q45k(uint16_t d_bits, uint16_t dmin_bits, const uint8_t* scales, const uint8_t* q,
                     const BlockQ8_K& a) {
  uint8_t sc[8], m[8];
  unpack_q4k_scales(scales, sc, m);
  int sumi = 0;
  int summins = 0;
  for (int j = 0; j < 8; ++j) {
    int dot = 0;
    for (int l = 0; l < 32; ++l) dot += q[32 * j + l] * a.qs[32 * j + l];
    sumi += sc[j] * dot;
    summins += m[j] * (a.bsums[2 * j] + a.bsums[2 * j + 1]);
  }
  return (a.d * half(d_bits)) * static_cast<float>(sumi) -
         (a.d * half(dmin_bits)) * static_cast<float>(summins);
}

float block_dot_q4_k(const BlockQ4_K& w, const BlockQ8_K& a) {
  uint8_t q[kQKK];
  unpack_q45k(w.qs, nullptr, q);
  return block_dot_q45k(w.d, w.dmin, w.scales, q, a);
}

float block_dot_q5_k(const BlockQ5_K& w, const BlockQ8_K& a) {
  uint8_t q[kQKK];
  unpack_q45k(w.qs, w.qh, q);
  return block_dot_q45k(w.d, w.dmin, w.scales, q, a);
}

float block_dot_q6_k(const BlockQ6_K& w, const BlockQ8_K& a) {
  int8_t q[kQKK];
  unpack_q6k(w, q);
  int sumi = 0;
  for (int j = 0; j < 16; ++j) {
    int dot = 0;
    for (int l = 0; l < 16; ++l) dot += q[16 * j + l] * a.qs[16 * j + l];
    sumi += w.scales[j] * dot;
  }
  return (a.d * half(w.d)) * static_cast<float>(sumi);
}

template <typename WeightBlock, float (*kBlockDot)(const WeightBlock&, const BlockQ8_K&)>
void dot_rows_k(int64_t n, const void* weight_row, const void* activations, size_t act_row_bytes,
                int num_rows, float* out) {
  const auto* w = static_cast<const WeightBlock*>(weight_row);
  for (int r = 0; r < num_rows; ++r) {
    const auto* a = reinterpret_cast<const BlockQ8_K*>(static_cast<const char*>(activations) +
                                                       r * act_row_bytes);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / kQKK; ++b) sum += kBlockDot(w[b], a[b]);
    out[r] = sum;
  }
}

}  // namespace

void dequantize_row_q8_k_scalar(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ8_K*>(src);
  for (int64_t b = 0; b < n / kQKK; ++b, dst += kQKK) {
    for (int j = 0; j < kQKK; ++j) dst[j] = static_cast<float>(x[b].qs[j]) * x[b].d;
  }
}

KernelFns scalar_kernel_fns_k(DType weight_type) {
  switch (weight_type) {
    case DType::Q4_K:
      return {dequantize_row_q4_k, convert_activation_row_q8_k,
              dot_rows_k<BlockQ4_K, block_dot_q4_k>};
    case DType::Q5_K:
      return {dequantize_row_q5_k, convert_activation_row_q8_k,
              dot_rows_k<BlockQ5_K, block_dot_q5_k>};
    case DType::Q6_K:
      return {dequantize_row_q6_k, convert_activation_row_q8_k,
              dot_rows_k<BlockQ6_K, block_dot_q6_k>};
    default:
      return {};
  }
}

}  // namespace folio::cpu::quant
