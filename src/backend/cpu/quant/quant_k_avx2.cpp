// AVX2 (+FMA, F16C) kernels for the K-quants (Q4_K, Q5_K, Q6_K) against Q8_K activations.
// Compiled with -mavx2 -mfma -mf16c; reached only through quant_kernels.cpp's CPU check.
//
// A super-block is walked 32 weights at a time; each group is unpacked once and used for every
// activation row: vpmaddubsw gives int16 pair sums, vpmaddwd by the group's scale (as int16)
// gives scaled int32 sums, accumulated per super-block and converted to float once. The
// sub-block minimums (Q4_K, Q5_K) and Q6_K's -32 offset use Q8_K's per-16 sums (bsums).
#include <immintrin.h>

#include "backend/cpu/quant/quant_avx2_common.h"
#include "backend/cpu/quant/quant_internal.h"
#include "quant/block_formats.h"

namespace folio::cpu::quant {
namespace {

using namespace avx2;

constexpr size_t kQ8KBytes = sizeof(BlockQ8_K);
constexpr size_t kQ8KQsOffset = offsetof(BlockQ8_K, qs);
constexpr size_t kQ8KBsumsOffset = offsetof(BlockQ8_K, bsums);

static inline float load_f32(const void* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// 16 where bit `bit` of each qh byte is set.
static inline __m256i high_bit_to_16(__m256i qh, int bit) {
  const __m256i moved =
      bit <= 4 ? _mm256_sll_epi16(qh, _mm_cvtsi32_si128(4 - bit)) : _mm256_srl_epi16(qh, _mm_cvtsi32_si128(bit - 4));
  return _mm256_and_si256(moved, _mm256_set1_epi8(16));
}

// Sub-blocks 2c and 2c+1 (low and high nibbles of qs[32c ..]) of a Q4_K / Q5_K block.
static inline void unpack_q45k_chunk(const uint8_t* qs, const __m256i* qh, int c, __m256i* lo, __m256i* hi) {
  const __m256i bytes = load256(qs + 32 * c);
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  *lo = _mm256_and_si256(bytes, low4);
  *hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4);
  if (qh != nullptr) {
    *lo = _mm256_or_si256(*lo, high_bit_to_16(*qh, 2 * c));
    *hi = _mm256_or_si256(*hi, high_bit_to_16(*qh, 2 * c + 1));
  }
}

template <bool kHasHighBit>
struct Q45KDot {
  static constexpr size_t kBytes = kHasHighBit ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
  static constexpr size_t kQsOffset = kHasHighBit ? offsetof(BlockQ5_K, qs) : offsetof(BlockQ4_K, qs);

  template <int R>
  static void run(int64_t n, const uint8_t* w, const uint8_t* act, size_t stride, float* out) {
    __m256 acc[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / kQKK; ++b) {
      const uint8_t* wb = w + b * kBytes;
      const uint8_t* ab0 = act + b * kQ8KBytes;
      uint8_t sc[8], m[8];
      unpack_q4k_scales(wb + 4, sc, m);
      const __m256i qh = kHasHighBit ? load256(wb + offsetof(BlockQ5_K, qh)) : _mm256_setzero_si256();
      __m256i sums[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) sums[r] = _mm256_setzero_si256();
      for (int c = 0; c < 4; ++c) {
        __m256i lo, hi;
        unpack_q45k_chunk(wb + kQsOffset, kHasHighBit ? &qh : nullptr, c, &lo, &hi);
        const __m256i scale_lo = _mm256_set1_epi16(sc[2 * c]);
        const __m256i scale_hi = _mm256_set1_epi16(sc[2 * c + 1]);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const uint8_t* a = ab0 + r * stride + kQ8KQsOffset + 64 * c;
          const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load256(a)), scale_lo);
          const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load256(a + 32)), scale_hi);
          sums[r] = _mm256_add_epi32(sums[r], _mm256_add_epi32(p_lo, p_hi));
        }
      }
      // Minimums per 32, bsums per 16: m_j for bsums 2j and 2j+1.
      const __m128i m8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(m));
      const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
      const float d = half_to_float(load_u16(wb));
      const float dmin = half_to_float(load_u16(wb + 2));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const uint8_t* ab = ab0 + r * stride;
        const float da = load_f32(ab);
        const __m256i min_sums = _mm256_madd_epi16(load256(ab + kQ8KBsumsOffset), mins);
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[r]), _mm256_set1_ps(da * d), acc[r]);
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(min_sums), _mm256_set1_ps(-(da * dmin)), acc[r]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) out[r] = hsum_ps(acc[r]);
  }
};

// Q6_K group g (0..3) of half h: 32 values 0..63 (the -32 is applied through bsums).
static inline __m256i unpack_q6k_group(__m256i ql0, __m256i ql1, __m256i qh, int g) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i top2 = _mm256_set1_epi8(0x30);
  switch (g) {
    case 0: return _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), top2));
    case 1: return _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), top2));
    case 2: return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, top2));
    default:
      return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                             _mm256_and_si256(_mm256_srli_epi16(qh, 2), top2));
  }
}

struct Q6KDot {
  template <int R>
  static void run(int64_t n, const uint8_t* w, const uint8_t* act, size_t stride, float* out) {
    __m256 acc[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / kQKK; ++b) {
      const uint8_t* wb = w + b * sizeof(BlockQ6_K);
      const uint8_t* ab0 = act + b * kQ8KBytes;
      const __m128i scales8 = load128(wb + offsetof(BlockQ6_K, scales));
      __m256i sums[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) sums[r] = _mm256_setzero_si256();
      for (int h = 0; h < 2; ++h) {
        const __m256i ql0 = load256(wb + 64 * h);
        const __m256i ql1 = load256(wb + 64 * h + 32);
        const __m256i qh = load256(wb + 128 + 32 * h);
        for (int g = 0; g < 4; ++g) {
          const __m256i q = unpack_q6k_group(ql0, ql1, qh, g);
          // Sub-blocks of 16 j, j+1: scale j on the low 8 pair sums, j+1 on the high 8.
          const long long j = 8 * h + 2 * g;
          const __m128i pick = _mm_set_epi64x((j + 1) * 0x0101010101010101ll, j * 0x0101010101010101ll);
          const __m256i scale = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales8, pick));
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            const __m256i a = load256(ab0 + r * stride + kQ8KQsOffset + 128 * h + 32 * g);
            sums[r] = _mm256_add_epi32(sums[r], _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), scale));
          }
        }
      }
      const __m256i scales16 = _mm256_cvtepi8_epi16(scales8);
      const float d = half_to_float(load_u16(wb + offsetof(BlockQ6_K, d)));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const uint8_t* ab = ab0 + r * stride;
        const __m256i offset = _mm256_madd_epi16(load256(ab + kQ8KBsumsOffset), scales16);
        const __m256i sum = _mm256_sub_epi32(sums[r], _mm256_slli_epi32(offset, 5));
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(load_f32(ab) * d), acc[r]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) out[r] = hsum_ps(acc[r]);
  }
};

// ---- dequantization -----------------------------------------------------------------------------

// 32 unsigned values -> keep_rounded(scale * q) - offset; offset 0 and signed values for Q6_K.
static inline void store_group(__m256i q, bool centered, float scale, float offset, float* dst) {
  const __m256 vs = _mm256_set1_ps(scale);
  const __m256 vo = _mm256_set1_ps(offset);
  for (int k = 0; k < 4; ++k) {
    const __m128i bytes = k < 2 ? _mm256_castsi256_si128(q) : _mm256_extracti128_si256(q, 1);
    __m256i ints = _mm256_cvtepu8_epi32((k & 1) ? _mm_srli_si128(bytes, 8) : bytes);
    if (centered) ints = _mm256_sub_epi32(ints, _mm256_set1_epi32(32));
    const __m256 y = _mm256_mul_ps(vs, _mm256_cvtepi32_ps(ints));
    _mm256_storeu_ps(dst + 8 * k, centered ? y : _mm256_sub_ps(keep_rounded(y), vo));
  }
}

template <bool kHasHighBit>
void dequantize_row_q45k(const void* src, float* dst, int64_t n) {
  using Dot = Q45KDot<kHasHighBit>;
  const auto* w = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kQKK; ++b, dst += kQKK) {
    const uint8_t* wb = w + b * Dot::kBytes;
    uint8_t sc[8], m[8];
    unpack_q4k_scales(wb + 4, sc, m);
    const float d = half_to_float(load_u16(wb));
    const float dmin = half_to_float(load_u16(wb + 2));
    const __m256i qh = kHasHighBit ? load256(wb + offsetof(BlockQ5_K, qh)) : _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      __m256i lo, hi;
      unpack_q45k_chunk(wb + Dot::kQsOffset, kHasHighBit ? &qh : nullptr, c, &lo, &hi);
      store_group(lo, false, d * static_cast<float>(sc[2 * c]), dmin * static_cast<float>(m[2 * c]), dst + 64 * c);
      store_group(hi, false, d * static_cast<float>(sc[2 * c + 1]), dmin * static_cast<float>(m[2 * c + 1]),
                  dst + 64 * c + 32);
    }
  }
}

void dequantize_row_q6_k(const void* src, float* dst, int64_t n) {
  const auto* w = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kQKK; ++b, dst += kQKK) {
    const uint8_t* wb = w + b * sizeof(BlockQ6_K);
    const auto* scales = reinterpret_cast<const int8_t*>(wb + offsetof(BlockQ6_K, scales));
    const float d = half_to_float(load_u16(wb + offsetof(BlockQ6_K, d)));
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = load256(wb + 64 * h);
      const __m256i ql1 = load256(wb + 64 * h + 32);
      const __m256i qh = load256(wb + 128 + 32 * h);
      for (int g = 0; g < 4; ++g) {
        const __m256i q = unpack_q6k_group(ql0, ql1, qh, g);
        const int j = 8 * h + 2 * g;
        float* y = dst + 128 * h + 32 * g;
        // Sub-block j is the group's first 16 values, j + 1 the next 16.
        const __m256 s0 = _mm256_set1_ps(d * static_cast<float>(scales[j]));
        const __m256 s1 = _mm256_set1_ps(d * static_cast<float>(scales[j + 1]));
        for (int k = 0; k < 4; ++k) {
          const __m128i bytes = k < 2 ? _mm256_castsi256_si128(q) : _mm256_extracti128_si256(q, 1);
          const __m256i ints =
              _mm256_sub_epi32(_mm256_cvtepu8_epi32((k & 1) ? _mm_srli_si128(bytes, 8) : bytes), _mm256_set1_epi32(32));
          _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(k < 2 ? s0 : s1, _mm256_cvtepi32_ps(ints)));
        }
      }
    }
  }
}

// ---- Q8_K activations ---------------------------------------------------------------------------

void convert_activation_row_q8_k(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(dst);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const float* x = src + b * kQKK;
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < kQKK; i += 8) amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
    const float d = hmax_ps(amax) / 127.0f;
    const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    for (int i = 0; i < kQKK; i += 32) {
      __m256i q[4];
      for (int k = 0; k < 4; ++k) {
        q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * k), id));
        q[k] = _mm256_min_epi32(_mm256_max_epi32(q[k], _mm256_set1_epi32(-127)), _mm256_set1_epi32(127));
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs + i), pack_32(q[0], q[1], q[2], q[3]));
      y[b].bsums[i / 16] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[0], q[1])));
      y[b].bsums[i / 16 + 1] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[2], q[3])));
    }
    y[b].d = d;
  }
}

}  // namespace

KernelFns avx2_kernel_fns_k(DType weight_type) {
  switch (weight_type) {
    case DType::Q4_K: return {dequantize_row_q45k<false>, convert_activation_row_q8_k, dot_rows_by_4<Q45KDot<false>>};
    case DType::Q5_K: return {dequantize_row_q45k<true>, convert_activation_row_q8_k, dot_rows_by_4<Q45KDot<true>>};
    case DType::Q6_K: return {dequantize_row_q6_k, convert_activation_row_q8_k, dot_rows_by_4<Q6KDot>};
    default: return {};
  }
}

}  // namespace folio::cpu::quant
