// Scalar reference dot products for the float types and the 32-element block types, the ground
// truth the SIMD paths are tested against: exact integer products per block, then block results
// accumulated in float. Dequantization and activation conversion are quant/'s reference code.
#include <cmath>
#include <cstring>

#include "backend/cpu/quant/quant_internal.h"
#include "core/fp16.h"
#include "quant/block_formats.h"
#include "quant/formats.h"

namespace folio::cpu::quant {
namespace {

float half(uint16_t bits) {
  return fp16_to_fp32(bits);
}

// ---- float weight types: activations stay F32 -------------------------------------------------

template <float (*kLoad)(const void*, int64_t)>
void dot_rows_float(int64_t n, const void* weight_row, const void* activations, size_t act_row_bytes, int num_rows,
                    float* out) {
  for (int r = 0; r < num_rows; ++r) {
    const auto* a = reinterpret_cast<const float*>(static_cast<const char*>(activations) + r * act_row_bytes);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += kLoad(weight_row, i) * a[i];
    out[r] = sum;
  }
}

float load_f32(const void* w, int64_t i) {
  return static_cast<const float*>(w)[i];
}
float load_f16(const void* w, int64_t i) {
  return fp16_to_fp32(static_cast<const uint16_t*>(w)[i]);
}
float load_bf16(const void* w, int64_t i) {
  return bf16_to_fp32(static_cast<const uint16_t*>(w)[i]);
}

// ---- dot products -------------------------------------------------------------------------------

// out[r] = sum over blocks of BlockDot(weight block, activation block of row r).
template <typename WeightBlock, typename ActBlock, float (*kBlockDot)(const WeightBlock&, const ActBlock&)>
void dot_rows_blocks(int64_t n, const void* weight_row, const void* activations, size_t act_row_bytes, int num_rows,
                     float* out) {
  const auto* w = static_cast<const WeightBlock*>(weight_row);
  for (int r = 0; r < num_rows; ++r) {
    const auto* a = reinterpret_cast<const ActBlock*>(static_cast<const char*>(activations) + r * act_row_bytes);
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

KernelFns scalar_kernel_fns(DType weight_type) {
  switch (weight_type) {
    case DType::F32: return {dequantizer(DType::F32), activation_quantizer(DType::F32), dot_rows_float<load_f32>};
    case DType::F16: return {dequantizer(DType::F16), activation_quantizer(DType::F32), dot_rows_float<load_f16>};
    case DType::BF16: return {dequantizer(DType::BF16), activation_quantizer(DType::F32), dot_rows_float<load_bf16>};
    case DType::Q4_0:
      return {dequantizer(DType::Q4_0), activation_quantizer(DType::Q8_0),
              dot_rows_blocks<BlockQ4_0, BlockQ8_0, block_dot_q4_0>};
    case DType::Q4_1:
      return {dequantizer(DType::Q4_1), activation_quantizer(DType::Q8_1),
              dot_rows_blocks<BlockQ4_1, BlockQ8_1, block_dot_q4_1>};
    case DType::Q5_0:
      return {dequantizer(DType::Q5_0), activation_quantizer(DType::Q8_0),
              dot_rows_blocks<BlockQ5_0, BlockQ8_0, block_dot_q5_0>};
    case DType::Q5_1:
      return {dequantizer(DType::Q5_1), activation_quantizer(DType::Q8_1),
              dot_rows_blocks<BlockQ5_1, BlockQ8_1, block_dot_q5_1>};
    case DType::Q8_0:
      return {dequantizer(DType::Q8_0), activation_quantizer(DType::Q8_0),
              dot_rows_blocks<BlockQ8_0, BlockQ8_0, block_dot_q8_0>};
    default: return scalar_kernel_fns_k(weight_type);
  }
}

}  // namespace folio::cpu::quant
