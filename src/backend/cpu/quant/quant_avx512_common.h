// Helpers for the *_avx512.cpp files only (they need AVX-512 F/BW/VL/DQ/VNNI and F16C).
// Everything here has internal linkage, so no copy compiled with AVX-512 can be linked into
// code that runs on CPUs without it.
#pragma once

// GCC 12 reports its own intrinsics' _mm512_undefined_*() placeholders (`__m512i __Y = __Y;`)
// as used uninitialized once they are inlined into loops; the warning is about the header.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace folio::cpu::quant::avx512 {

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

// 32 bytes at p0 in the low half, 32 bytes at p1 in the high half.
static inline __m512i load_pair256(const void* p0, const void* p1) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(load256(p0)), load256(p1), 1);
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

// Four pairs of fp16 values -> 8 floats.
static inline __m256 half8_to_float(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  const __m128i lo = _mm_cvtsi64_si128(static_cast<long long>(a | (static_cast<uint64_t>(b) << 32)));
  return _mm256_cvtph_ps(_mm_insert_epi64(lo, static_cast<long long>(c | (static_cast<uint64_t>(d) << 32)), 1));
}

static inline int hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

static inline float reduce256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// See keep_rounded(float) in quant_internal.h: blocks contraction of a product into an FMA.
static inline __m512 keep_rounded(__m512 x) {
  __asm__("" : "+v"(x));
  return x;
}

// dot_rows in chunks of up to 8 activation rows; Impl::run<R> computes R rows at once.
template <typename Impl>
static void dot_rows_by_8(int64_t n, const void* weight_row, const void* activations, size_t act_row_bytes,
                          int num_rows, float* out) {
  const auto* w = static_cast<const uint8_t*>(weight_row);
  const auto* act = static_cast<const uint8_t*>(activations);
  while (num_rows > 0) {
    const int rows = num_rows < 8 ? num_rows : 8;
    switch (rows) {
      case 1: Impl::template run<1>(n, w, act, act_row_bytes, out); break;
      case 2: Impl::template run<2>(n, w, act, act_row_bytes, out); break;
      case 3: Impl::template run<3>(n, w, act, act_row_bytes, out); break;
      case 4: Impl::template run<4>(n, w, act, act_row_bytes, out); break;
      case 5: Impl::template run<5>(n, w, act, act_row_bytes, out); break;
      case 6: Impl::template run<6>(n, w, act, act_row_bytes, out); break;
      case 7: Impl::template run<7>(n, w, act, act_row_bytes, out); break;
      default: Impl::template run<8>(n, w, act, act_row_bytes, out); break;
    }
    act += rows * act_row_bytes;
    out += rows;
    num_rows -= rows;
  }
}

}  // namespace folio::cpu::quant::avx512
