// Helpers for the *_avx2.cpp files only (they need AVX2, FMA and F16C). Everything here has
// internal linkage, so no copy compiled with AVX2 can be linked into code that runs on CPUs
// without it.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace folio::cpu::quant::avx2 {

static inline uint16_t load_u16(const void* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

static inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

static inline __m128i load128(const void* p) {
  return _mm_loadu_si128(static_cast<const __m128i*>(p));
}
static inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

static inline float half_to_float(uint16_t h) {
  return _cvtsh_ss(h);
}
static inline uint16_t float_to_half(float f) {
  return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}

// Two fp16 values -> floats in lanes 0 and 1 (lanes 2, 3 zero).
static inline __m128 half2_to_float(uint16_t a, uint16_t b) {
  return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(a | (static_cast<uint32_t>(b) << 16))));
}

// Two pairs of fp16 values (each pair as 4 little-endian bytes) -> 4 floats.
static inline __m128 half4_to_float(uint32_t a, uint32_t b) {
  return _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(a | (static_cast<uint64_t>(b) << 32))));
}

static inline int hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

// See keep_rounded(float) in quant_internal.h: blocks contraction of a product into an FMA.
static inline __m256 keep_rounded(__m256 x) {
  __asm__("" : "+x"(x));
  return x;
}

static inline float hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

static inline float hmax_ps(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// Four vectors of 8 int32 (each within int8 range) -> 32 int8 in order.
static inline __m256i pack_32(__m256i q0, __m256i q1, __m256i q2, __m256i q3) {
  const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
  return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// dot_rows in chunks of up to 4 activation rows (16 ymm registers hold no more accumulators);
// Impl::run<R> computes R rows at once.
template <typename Impl>
static void dot_rows_by_4(int64_t n, const void* weight_row, const void* activations, size_t act_row_bytes,
                          int num_rows, float* out) {
  const auto* w = static_cast<const uint8_t*>(weight_row);
  const auto* act = static_cast<const uint8_t*>(activations);
  while (num_rows > 0) {
    const int rows = num_rows < 4 ? num_rows : 4;
    switch (rows) {
      case 1: Impl::template run<1>(n, w, act, act_row_bytes, out); break;
      case 2: Impl::template run<2>(n, w, act, act_row_bytes, out); break;
      case 3: Impl::template run<3>(n, w, act, act_row_bytes, out); break;
      default: Impl::template run<4>(n, w, act, act_row_bytes, out); break;
    }
    act += rows * act_row_bytes;
    out += rows;
    num_rows -= rows;
  }
}

}  // namespace folio::cpu::quant::avx2
