// Scalar reference dot products for the K-quants (Q4_K, Q5_K, Q6_K) against their activation
// partner Q8_K, with exact integer parts (dequantizers: quant/dequantize.cpp).
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

// sum_j d*sc[j]*dot(q_j, a_j) - dmin*m[j]*sum(a_j), with exact integer parts.
float block_dot_q45k(uint16_t d_bits, uint16_t dmin_bits, const uint8_t* scales, const uint8_t* q, const BlockQ8_K& a) {
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
  return (a.d * half(d_bits)) * static_cast<float>(sumi) - (a.d * half(dmin_bits)) * static_cast<float>(summins);
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
void dot_rows_k(int64_t n, const void* weight_row, const void* activations, size_t act_row_bytes, int num_rows,
                float* out) {
  const auto* w = static_cast<const WeightBlock*>(weight_row);
  for (int r = 0; r < num_rows; ++r) {
    const auto* a = reinterpret_cast<const BlockQ8_K*>(static_cast<const char*>(activations) + r * act_row_bytes);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / kQKK; ++b) sum += kBlockDot(w[b], a[b]);
    out[r] = sum;
  }
}

}  // namespace

KernelFns scalar_kernel_fns_k(DType weight_type) {
  switch (weight_type) {
    case DType::Q4_K:
      return {dequantizer(DType::Q4_K), activation_quantizer(DType::Q8_K), dot_rows_k<BlockQ4_K, block_dot_q4_k>};
    case DType::Q5_K:
      return {dequantizer(DType::Q5_K), activation_quantizer(DType::Q8_K), dot_rows_k<BlockQ5_K, block_dot_q5_k>};
    case DType::Q6_K:
      return {dequantizer(DType::Q6_K), activation_quantizer(DType::Q8_K), dot_rows_k<BlockQ6_K, block_dot_q6_k>};
    default: return {};
  }
}

}  // namespace folio::cpu::quant
