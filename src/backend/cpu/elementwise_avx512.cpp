// elementwise_avx512.h (this file gets the AVX-512 flags).
#include "backend/cpu/elementwise_avx512.h"

#include <cmath>

#include "backend/cpu/vector_exp_avx512.h"

namespace folio::cpu {

void swiglu_avx512(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 e = exp_fast_avx512(_mm512_sub_ps(_mm512_setzero_ps(), g));
    // 1 / (1 + e): the 14-bit reciprocal and one Newton step (a divide costs 16 cycles a vector).
    const __m512 d = _mm512_add_ps(one, e);
    __m512 inv = _mm512_rcp14_ps(d);
    inv = _mm512_mul_ps(inv, _mm512_fnmadd_ps(d, inv, _mm512_set1_ps(2.0f)));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_mul_ps(g, inv), _mm512_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
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
