// exp on 16 floats with AVX-512, correctly rounded: the argument reduced in float64 (k = round(x
// / ln 2), r = x - k ln 2 with ln 2 in two parts) and e^r by a degree-11 Taylor polynomial
// (|error| < 4e-14 relative before the rounding to float). Over every float in [-104, 0] it
// differs from the correctly rounded value once in 1.1e9, and from glibc's expf (0.502 ulp) by
// one ulp in 9e-5 of them. Below -104 it gives 0 and above 89 infinity, as expf does.
//
// For files compiled with the AVX-512 flags only: static functions, so no baseline file can
// ever be linked to this code.
#pragma once

// GCC 12 reports its own intrinsics' _mm512_undefined_*() placeholders as used uninitialized
// once inlined; the warning is about the header (and so for the rest of any file including this).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace folio::cpu {

static inline __m512d exp_avx512_pd(__m512d x) {
  x = _mm512_min_pd(_mm512_max_pd(x, _mm512_set1_pd(-104.0)), _mm512_set1_pd(89.0));
  const __m512d k = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(1.4426950408889634)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512d r = _mm512_fnmadd_pd(k, _mm512_set1_pd(0x1.62e42fefa39efp-1), x);
  r = _mm512_fnmadd_pd(k, _mm512_set1_pd(0x1.abc9e3b39803fp-56), r);
  __m512d p = _mm512_set1_pd(1.0 / 39916800.0);
  const double coefficients[] = {1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120,
                                 1.0 / 24,      1.0 / 6,      0.5,         1.0,        1.0};
  for (double c : coefficients) p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(c));
  return _mm512_scalef_pd(p, k);
}

static inline __m512 exp_avx512(__m512 x) {
  const __m256 lo = _mm512_castps512_ps256(x);
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1));
  const __m256 a = _mm512_cvtpd_ps(exp_avx512_pd(_mm512_cvtps_pd(lo)));
  const __m256 b = _mm512_cvtpd_ps(exp_avx512_pd(_mm512_cvtps_pd(hi)));
  return _mm512_insertf32x8(_mm512_castps256_ps512(a), b, 1);
}

// A cheaper exp for activations, where an ulp does not matter: float throughout, the same
// reduction (ln 2 in two float parts) and a degree-7 Taylor polynomial (truncation below 6e-9
// relative): within 2 ulp of the correctly rounded value; 0 below -104, and it saturates at
// e^88.7 (3.3e38, finite: 1 / (1 + e) stays a number).
static inline __m512 exp_fast_avx512(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(88.7f));
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693145752f), x);  // ln 2's top bits: k * it is exact
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(1.42860677e-6f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  const float coefficients[] = {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};
  for (float c : coefficients) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
  return _mm512_scalef_ps(p, k);
}

// silu(g) * u = g / (1 + exp(-g)) * u, with the fast exp and a reciprocal refined by one
// Newton step (a divide costs 16 cycles a vector). The one formula of every SwiGLU path on
// AVX-512: the element-wise op and the matmul epilogue give the same bits.
static inline __m512 silu_mul_avx512(__m512 g, __m512 u) {
  const __m512 e = exp_fast_avx512(_mm512_sub_ps(_mm512_setzero_ps(), g));
  const __m512 d = _mm512_add_ps(_mm512_set1_ps(1.0f), e);
  __m512 inv = _mm512_rcp14_ps(d);
  inv = _mm512_mul_ps(inv, _mm512_fnmadd_ps(d, inv, _mm512_set1_ps(2.0f)));
  return _mm512_mul_ps(_mm512_mul_ps(g, inv), u);
}

// gelu_tanh(g) * u, GELU's tanh approximation: 0.5 g (1 + tanh(z)) = g / (1 + exp(-2z)), z =
// sqrt(2 / pi) (g + 0.044715 g^3); the fast exp and silu_mul_avx512's refined reciprocal. For
// g below about -10 the fast exp saturates at e^88.7 and the reciprocal of 1 + that is flushed
// to 0 by rcp14: the result is 0, as the exact one is below float's smallest normal.
static inline __m512 gelu_tanh_mul_avx512(__m512 g, __m512 u) {
  const __m512 g3 = _mm512_mul_ps(_mm512_mul_ps(g, g), g);
  const __m512 z =
      _mm512_mul_ps(_mm512_set1_ps(0.7978845608028654f), _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), g3, g));
  const __m512 e = exp_fast_avx512(_mm512_mul_ps(_mm512_set1_ps(-2.0f), z));
  const __m512 d = _mm512_add_ps(_mm512_set1_ps(1.0f), e);
  __m512 inv = _mm512_rcp14_ps(d);
  inv = _mm512_mul_ps(inv, _mm512_fnmadd_ps(d, inv, _mm512_set1_ps(2.0f)));
  return _mm512_mul_ps(_mm512_mul_ps(g, inv), u);
}

}  // namespace folio::cpu
