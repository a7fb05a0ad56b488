// elementwise_avx512.h (this file gets the AVX-512 flags).
#include "backend/cpu/elementwise_avx512.h"

#include <cmath>

#include "backend/cpu/vector_exp_avx512.h"

namespace folio::cpu {

void swiglu_avx512(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(out + i, silu_mul_avx512(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void geglu_tanh_avx512(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(out + i, gelu_tanh_mul_avx512(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  }
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-2.0f * kSqrt2OverPi * (g + 0.044715f * g * g * g))) * up[i];
  }
}

void exp_avx512_array(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, exp_avx512(_mm512_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] = std::exp(x[i]);
}

void exp_fast_avx512_array(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, exp_fast_avx512(_mm512_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] = std::exp(x[i]);
}

}  // namespace folio::cpu
