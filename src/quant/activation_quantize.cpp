// Scalar converters of float activations into the formats the CPU's integer dot products take
// (Q8_0, Q8_1, Q8_K): d = max|x| / 127 (fp16 for Q8_0 / Q8_1, float for Q8_K), q =
// round-half-to-even(x / d), as the SIMD conversion instructions round, so every path writes the
// same bytes. (The reference *weight* quantizers round like GGUF's instead.)
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "quant/block_formats.h"
#include "quant/float_rounding.h"
#include "quant/formats.h"

namespace folio::quant {
namespace {

void convert_activation_row_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

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

}  // namespace

QuantizeRowFn activation_quantizer(DType activation_type) {
  switch (activation_type) {
    case DType::F32: return convert_activation_row_f32;
    case DType::Q8_0: return convert_activation_row_q8_0;
    case DType::Q8_1: return convert_activation_row_q8_1;
    case DType::Q8_K: return convert_activation_row_q8_k;
    default: return nullptr;
  }
}

}  // namespace folio::quant
