// AVX-512 (F, BW, VL, DQ, VNNI) kernels for the K-quants (Q4_K, Q5_K, Q6_K) against Q8_K
// activations. Compiled with AVX-512 flags; reached only through quant_kernels.cpp's CPU check.
//
// A super-block of 256 weights is unpacked into four 512-bit registers of 64 unsigned values,
// in element order, once for all activation rows. vpmaddubsw multiplies them by the activation
// bytes into int16 pair sums; vpdpwssd multiplies those by each sub-block's scale (spread to
// its lanes) and accumulates int32. The sub-block minimums (Q4_K, Q5_K) and Q6_K's -32 offset
// need only sums of activations, which Q8_K carries (bsums, per 16).
#include "backend/cpu/quant/quant_avx512_common.h"  // first: it sets a diagnostic pragma

#include <immintrin.h>

#include "backend/cpu/quant/quant_internal.h"
#include "quant/block_formats.h"

namespace folio::cpu::quant {
namespace {

using namespace avx512;

constexpr size_t kQ8KBytes = sizeof(BlockQ8_K);
constexpr size_t kQ8KQsOffset = offsetof(BlockQ8_K, qs);
constexpr size_t kQ8KBsumsOffset = offsetof(BlockQ8_K, bsums);

static inline float load_f32(const void* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Word index vectors for vpermw: entry i of row k is first(k) + i / group_size.
struct WordIndex {
  alignas(64) int16_t rows[4][32];
};

constexpr WordIndex make_word_index(int first_step, int group_size) {
  WordIndex index{};
  for (int k = 0; k < 4; ++k) {
    for (int i = 0; i < 32; ++i) index.rows[k][i] = static_cast<int16_t>(first_step * k + i / group_size);
  }
  return index;
}

// Q4_K / Q5_K: register c holds sub-blocks 2c, 2c+1 (16 pairs each).
constexpr WordIndex kQ45KScaleIndex = make_word_index(2, 16);
// Q6_K: register v holds sub-blocks of 16 4v .. 4v+3 (8 pairs each).
constexpr WordIndex kQ6KScaleIndex = make_word_index(4, 8);
// bsums (per 16) -> minimum of their sub-block of 32: entry i is i / 2.
constexpr WordIndex kPairIndex = make_word_index(0, 2);

static inline __m512i word_index(const WordIndex& index, int row) {
  return _mm512_load_si512(index.rows[row]);
}

// One unpacked super-block: 4 x 64 values and the int16 scale of each value pair's sub-block.
struct UnpackedK {
  __m512i q[4];
  __m512i scale[4];
};

// Q4_K / Q5_K values: sub-blocks 2c, 2c+1 are the low and high nibbles of qs[32c .. 32c+31].
static inline void unpack_q45k_values(const uint8_t* qs, const uint8_t* qh, UnpackedK* u) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  for (int half = 0; half < 2; ++half) {
    const __m512i bytes = _mm512_loadu_si512(qs + 64 * half);  // chunks 2h, 2h+1
    const __m512i lo = _mm512_and_si512(bytes, low4);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low4);
    u->q[2 * half] = _mm512_shuffle_i64x2(lo, hi, 0x44);      // lo chunk 2h, hi chunk 2h
    u->q[2 * half + 1] = _mm512_shuffle_i64x2(lo, hi, 0xee);  // lo chunk 2h+1, hi chunk 2h+1
  }
  if (qh == nullptr) return;
  const __m512i high = _mm512_broadcast_i64x4(load256(qh));
  for (int c = 0; c < 4; ++c) {
    // Bit 2c of qh[l] belongs to sub-block 2c (low half), bit 2c+1 to sub-block 2c+1.
    const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (2 * c))),
                                           _mm256_set1_epi8(static_cast<char>(2 << (2 * c))), 1);
    const __mmask64 set = _mm512_test_epi8_mask(high, bit);
    u->q[c] = _mm512_mask_add_epi8(u->q[c], set, u->q[c], _mm512_set1_epi8(16));
  }
}

static inline void unpack_q45k_scales(const uint8_t* packed, UnpackedK* u, __m256i* mins_per_16) {
  uint64_t sc, m;
  unpack_q4k_scales_u64(packed, &sc, &m);
  const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc))));
  for (int c = 0; c < 4; ++c) u->scale[c] = _mm512_permutexvar_epi16(word_index(kQ45KScaleIndex, c), sc16);
  const __m256i m16 = _mm256_castsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(m))));
  // bsums come per 16, minimums per 32: m_j for bsums 2j and 2j+1.
  *mins_per_16 = _mm256_permutexvar_epi16(_mm512_castsi512_si256(word_index(kPairIndex, 0)), m16);
}

// Q6_K values (0..63, the -32 is applied through bsums) and per-pair scales.
static inline void unpack_q6k(const uint8_t* w, UnpackedK* u, __m256i* scales16) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i top2 = _mm512_set1_epi8(0x30);
  for (int h = 0; h < 2; ++h) {
    const __m512i ql = _mm512_loadu_si512(w + 64 * h);
    const __m512i qh = _mm512_broadcast_i64x4(load256(w + 128 + 32 * h));
    // Elements 0-63 of the half: ql low nibbles | qh bits (0-1 | 2-3) << 4.
    const __m512i high_a = _mm512_and_si512(
        _mm512_sllv_epi16(qh, _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1)), top2);
    // Elements 64-127: ql high nibbles | qh bits (4-5 | 6-7) << 4.
    const __m512i high_b = _mm512_and_si512(
        _mm512_srlv_epi16(qh, _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1)), top2);
    u->q[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, low4), high_a);
    u->q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4), high_b);
  }
  *scales16 = _mm256_cvtepi8_epi16(load128(w + offsetof(BlockQ6_K, scales)));
  const __m512i s = _mm512_castsi256_si512(*scales16);
  for (int v = 0; v < 4; ++v) u->scale[v] = _mm512_permutexvar_epi16(word_index(kQ6KScaleIndex, v), s);
}

// sum over the 4 registers of scale * (q . a): int32 lanes.
static inline __m512i scaled_dot(const UnpackedK& u, const uint8_t* a_qs) {
  __m512i sum = _mm512_setzero_si512();
  for (int v = 0; v < 4; ++v) {
    const __m512i products = _mm512_maddubs_epi16(u.q[v], _mm512_loadu_si512(a_qs + 64 * v));
    sum = _mm512_dpwssd_epi32(sum, products, u.scale[v]);
  }
  return sum;
}

template <bool kHasHighBit>
struct Q45KDot {
  static constexpr size_t kBytes = kHasHighBit ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
  static constexpr size_t kQsOffset = kHasHighBit ? offsetof(BlockQ5_K, qs) : offsetof(BlockQ4_K, qs);

  template <int R>
  static void run(int64_t n, const uint8_t* w, const uint8_t* act, size_t stride, float* out) {
    __m512 acc[R];
    __m256 acc_min[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      acc[r] = _mm512_setzero_ps();
      acc_min[r] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < n / kQKK; ++b) {
      const uint8_t* wb = w + b * kBytes;
      UnpackedK u;
      __m256i mins;
      unpack_q45k_scales(wb + 4, &u, &mins);
      unpack_q45k_values(wb + kQsOffset, kHasHighBit ? wb + offsetof(BlockQ5_K, qh) : nullptr, &u);
      const float d = half_to_float(load_u16(wb));
      const float dmin = half_to_float(load_u16(wb + 2));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const uint8_t* ab = act + r * stride + b * kQ8KBytes;
        const float da = load_f32(ab);
        const __m512i sum = scaled_dot(u, ab + kQ8KQsOffset);
        const __m256i min_sum = _mm256_madd_epi16(load256(ab + kQ8KBsumsOffset), mins);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(da * d), acc[r]);
        acc_min[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(min_sum), _mm256_set1_ps(da * dmin), acc_min[r]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(acc[r]) - reduce256(acc_min[r]);
  }
};

struct Q6KDot {
  template <int R>
  static void run(int64_t n, const uint8_t* w, const uint8_t* act, size_t stride, float* out) {
    __m512 acc[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < n / kQKK; ++b) {
      const uint8_t* wb = w + b * sizeof(BlockQ6_K);
      UnpackedK u;
      __m256i scales16;
      unpack_q6k(wb, &u, &scales16);
      const float d = half_to_float(load_u16(wb + offsetof(BlockQ6_K, d)));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const uint8_t* ab = act + r * stride + b * kQ8KBytes;
        __m512i sum = scaled_dot(u, ab + kQ8KQsOffset);
        // The stored values are q + 32: subtract 32 * sum_j scale_j * bsum_j.
        const __m256i offset = _mm256_madd_epi16(load256(ab + kQ8KBsumsOffset), scales16);
        sum = _mm512_sub_epi32(sum, _mm512_zextsi256_si512(_mm256_slli_epi32(offset, 5)));
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(load_f32(ab) * d), acc[r]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(acc[r]);
  }
};

// ---- dequantization: x = keep_rounded((d * sc) * q) - dmin * m, per sub-block -------------------

static inline void store_sub_block(__m256i q32, float scale, float offset, float* dst) {
  const __m512 vs = _mm512_set1_ps(scale);
  const __m512 vo = _mm512_set1_ps(offset);
  const __m512 f0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(q32)));
  const __m512 f1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(q32, 1)));
  _mm512_storeu_ps(dst, _mm512_sub_ps(keep_rounded(_mm512_mul_ps(vs, f0)), vo));
  _mm512_storeu_ps(dst + 16, _mm512_sub_ps(keep_rounded(_mm512_mul_ps(vs, f1)), vo));
}

template <bool kHasHighBit>
void dequantize_row_q45k(const void* src, float* dst, int64_t n) {
  using Dot = Q45KDot<kHasHighBit>;
  const auto* w = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kQKK; ++b, dst += kQKK) {
    const uint8_t* wb = w + b * Dot::kBytes;
    UnpackedK u;
    unpack_q45k_values(wb + Dot::kQsOffset, kHasHighBit ? wb + offsetof(BlockQ5_K, qh) : nullptr, &u);
    uint8_t sc[8], m[8];
    unpack_q4k_scales(wb + 4, sc, m);
    const float d = half_to_float(load_u16(wb));
    const float dmin = half_to_float(load_u16(wb + 2));
    for (int c = 0; c < 4; ++c) {
      for (int part = 0; part < 2; ++part) {
        const int j = 2 * c + part;
        const __m256i q32 = part == 0 ? _mm512_castsi512_si256(u.q[c]) : _mm512_extracti64x4_epi64(u.q[c], 1);
        store_sub_block(q32, d * static_cast<float>(sc[j]), dmin * static_cast<float>(m[j]), dst + 32 * j);
      }
    }
  }
}

void dequantize_row_q6_k(const void* src, float* dst, int64_t n) {
  const auto* w = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kQKK; ++b, dst += kQKK) {
    const uint8_t* wb = w + b * sizeof(BlockQ6_K);
    UnpackedK u;
    __m256i scales16;
    unpack_q6k(wb, &u, &scales16);
    const float d = half_to_float(load_u16(wb + offsetof(BlockQ6_K, d)));
    const auto* scales = reinterpret_cast<const int8_t*>(wb + offsetof(BlockQ6_K, scales));
    for (int v = 0; v < 4; ++v) {
      alignas(64) uint8_t q[64];
      _mm512_store_si512(q, u.q[v]);
      for (int k = 0; k < 4; ++k) {
        const int j = 4 * v + k;  // sub-block of 16
        const __m512i centered = _mm512_sub_epi32(_mm512_cvtepu8_epi32(load128(q + 16 * k)), _mm512_set1_epi32(32));
        const __m512 scale = _mm512_set1_ps(d * static_cast<float>(scales[j]));
        _mm512_storeu_ps(dst + 16 * j, _mm512_mul_ps(scale, _mm512_cvtepi32_ps(centered)));
      }
    }
  }
}

// ---- Q8_K activations ---------------------------------------------------------------------------

void convert_activation_row_q8_k(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const float* x = src + b * kQKK;
    __m512 amax = _mm512_setzero_ps();
    for (int i = 0; i < kQKK; i += 16) amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
    const float d = _mm512_reduce_max_ps(amax) / 127.0f;
    const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    for (int i = 0; i < kQKK; i += 16) {
      __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i), id));
      q = _mm512_min_epi32(_mm512_max_epi32(q, _mm512_set1_epi32(-127)), _mm512_set1_epi32(127));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs + i), _mm512_cvtepi32_epi8(q));
      y[b].bsums[i / 16] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
    }
    y[b].d = d;
  }
}

}  // namespace

KernelFns avx512_kernel_fns_k(DType weight_type) {
  switch (weight_type) {
    case DType::Q4_K: return {dequantize_row_q45k<false>, convert_activation_row_q8_k, dot_rows_by_8<Q45KDot<false>>};
    case DType::Q5_K: return {dequantize_row_q45k<true>, convert_activation_row_q8_k, dot_rows_by_8<Q45KDot<true>>};
    case DType::Q6_K: return {dequantize_row_q6_k, convert_activation_row_q8_k, dot_rows_by_8<Q6KDot>};
    default: return {};
  }
}

}  // namespace folio::cpu::quant
