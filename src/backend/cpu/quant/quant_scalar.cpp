// Scalar reference kernels for the float types and the 32-element block types. These are the
// ground truth the SIMD paths are tested against: dequantization follows the GGUF formulas
// operation by operation (no fused multiply-add), so SIMD dequantizers can match it bit for bit;
// dot products sum exact integer products per block, then accumulate block results in float.
#include <cmath>
#include <cstring>

#include "backend/cpu/quant/quant_blocks.h"
#include "backend/cpu/quant/quant_internal.h"
#include "core/fp16.h"

namespace folio::cpu::quant {
namespace {

float half(uint16_t bits) { return fp16_to_fp32(bits); }

// ---- float weight types: activations stay F32 -------------------------------------------------

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

void convert_activation_row_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

template <float (*kLoad)(const void*, int64_t)>
void dot_rows_float(int64_t n, const void* weight_row, const void* activations,
                    size_t act_row_bytes, int num_rows, float* out) {
  for (int r = 0; r < num_rows; ++r) {
    const auto* a = reinterpret_cast<const float*>(static_cast<const char*>(activations) +
                                                   r * act_row_bytes);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += kLoad(weight_row, i) * a[i];
    out[r] = sum;
  }
}

float load_f32(const void* w, int64_t i) { return static_cast<const float*>(w)[i]; }
float load_f16(const void* w, int64_t i) { return fp16_to_fp32(static_cast<const uint16_t*>(w)[i]); }
float load_bf16(const void* w, int64_t i) { return bf16_to_fp32(static_cast<const uint16_t*>(w)[i]); }

// ---- activation converters ----------------------------------------------------------------------

// Scale of a block of 32 with max |x| = amax, so that q = x / d lies in [-127, 127]; returns
// d and sets *inverse (0 for an all-zero block).
float q8_scale(const float* x, int count, float* inverse) {
  float amax = 0.0f;
  for (int j = 0; j < count; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  *inverse = d != 0.0f ? 1.0f / d : 0.0f;
  return d;
}

void convert_activation_row_q8_0(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_0*>(dst);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* x = src + b * kQK;
    float id;
    const float d = q8_scale(x, kQK, &id);
    y[b].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) y[b].qs[j] = static_cast<int8_t>(round_half_even(x[j] * id));
  }
}

void convert_activation_row_q8_1(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_1*>(dst);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* x = src + b * kQK;
    float id;
    const float d = q8_scale(x, kQK, &id);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      y[b].qs[j] = static_cast<int8_t>(round_half_even(x[j] * id));
      sum += y[b].qs[j];
    }
    y[b].d = fp32_to_fp16(d);
    y[b].s = fp32_to_fp16(static_cast<float>(sum) * d);
  }
}

// ---- dequantizers -------------------------------------------------------------------------------

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

uint32_t load_qh(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof bits);
  return bits;
}

// The 5-bit values of a Q5 block in element order.
void unpack_q5(const uint8_t* qs, const uint8_t* qh_bytes, int* q) {
  const uint32_t qh = load_qh(qh_bytes);
  for (int j = 0; j < 16; ++j) {
    q[j] = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
    q[j + 16] = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
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

// ---- dot products -------------------------------------------------------------------------------

// out[r] = sum over blocks of BlockDot(weight block, activation block of row r).
template <typename WeightBlock, typename ActBlock, float (*kBlockDot)(const WeightBlock&,
                                                                      const ActBlock&)>
void dot_rows_blocks(int64_t n, const void* weight_row, const void* activations,
                     size_t act_row_bytes, int num_rows, float* out) {
  const auto* w = static_cast<const WeightBlock*>(weight_row);
  for (int r = 0; r < num_rows; ++r) {
    const auto* a = reinterpret_cast<const ActBlock*>(static_cast<const char*>(activations) +
                                                      r * act_row_bytes);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / kQK; ++b) sum += kBlockDot(w[b], a[b]);
    out[r] = sum;
  }
}

float block_dot_q4_0(const BlockQ4_0& w, const BlockQ8_0& a) {
  int isum = 0;
  for (int j = 0; j < 16; ++j) {
    isum += ((w.qs[j] & 0x0f) - 8) * a.qs[j] + ((w.qs[j] >> 4) - 8) * a.qs[j + 16];
  }
  return static_cast<float>(isum) * (half(w.d) * half(a.d));
}

float block_dot_q4_1(const BlockQ4_1& w, const BlockQ8_1& a) {
  int isum = 0;
  for (int j = 0; j < 16; ++j) isum += (w.qs[j] & 0x0f) * a.qs[j] + (w.qs[j] >> 4) * a.qs[j + 16];
  return static_cast<float>(isum) * (half(w.d) * half(a.d)) + half(w.m) * half(a.s);
}

float block_dot_q5_0(const BlockQ5_0& w, const BlockQ8_0& a) {
  int q[kQK];
  unpack_q5(w.qs, w.qh, q);
  int isum = 0;
  for (int j = 0; j < kQK; ++j) isum += (q[j] - 16) * a.qs[j];
  return static_cast<float>(isum) * (half(w.d) * half(a.d));
}

float block_dot_q5_1(const BlockQ5_1& w, const BlockQ8_1& a) {
  int q[kQK];
  unpack_q5(w.qs, w.qh, q);
  int isum = 0;
  for (int j = 0; j < kQK; ++j) isum += q[j] * a.qs[j];
  return static_cast<float>(isum) * (half(w.d) * half(a.d)) + half(w.m) * half(a.s);
}

float block_dot_q8_0(const BlockQ8_0& w, const BlockQ8_0& a) {
  int isum = 0;
  for (int j = 0; j < kQK; ++j) isum += w.qs[j] * a.qs[j];
  return static_cast<float>(isum) * (half(w.d) * half(a.d));
}

}  // namespace

void dequantize_row_q8_1_scalar(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ8_1*>(src);
  for (int64_t b = 0; b < n / kQK; ++b, dst += kQK) {
    const float d = half(x[b].d);
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(x[b].qs[j]) * d;
  }
}

KernelFns scalar_kernel_fns(DType weight_type) {
  switch (weight_type) {
    case DType::F32:
      return {dequantize_row_f32, convert_activation_row_f32, dot_rows_float<load_f32>};
    case DType::F16:
      return {dequantize_row_f16, convert_activation_row_f32, dot_rows_float<load_f16>};
    case DType::BF16:
      return {dequantize_row_bf16, convert_activation_row_f32, dot_rows_float<load_bf16>};
    case DType::Q4_0:
      return {dequantize_row_q4_0, convert_activation_row_q8_0,
              dot_rows_blocks<BlockQ4_0, BlockQ8_0, block_dot_q4_0>};
    case DType::Q4_1:
      return {dequantize_row_q4_1, convert_activation_row_q8_1,
              dot_rows_blocks<BlockQ4_1, BlockQ8_1, block_dot_q4_1>};
    case DType::Q5_0:
      return {dequantize_row_q5_0, convert_activation_row_q8_0,
              dot_rows_blocks<BlockQ5_0, BlockQ8_0, block_dot_q5_0>};
    case DType::Q5_1:
      return {dequantize_row_q5_1, convert_activation_row_q8_1,
              dot_rows_blocks<BlockQ5_1, BlockQ8_1, block_dot_q5_1>};
    case DType::Q8_0:
      return {dequantize_row_q8_0, convert_activation_row_q8_0,
              dot_rows_blocks<BlockQ8_0, BlockQ8_0, block_dot_q8_0>};
    default:
      return scalar_kernel_fns_k(weight_type);
  }
}

bool is_weight_type(DType type) {
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
    case DType::Q6_K:
      return true;
    default:
      return false;
  }
}

DType activation_type_for(DType weight_type) {
  switch (weight_type) {
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
      return DType::Q8_0;
    case DType::Q4_1:
    case DType::Q5_1:
      return DType::Q8_1;
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      return DType::Q8_K;
    default:
      return DType::F32;
  }
}

}  // namespace folio::cpu::quant
