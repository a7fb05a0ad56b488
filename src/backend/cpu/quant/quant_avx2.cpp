// AVX2 (+FMA, F16C) kernels for the float types and the 32-element block types. Compiled with
// -mavx2 -mfma -mf16c; reached only through quant_kernels.cpp's CPU check.
//
// One 256-bit register holds a block's 32 weights, unpacked once for all activation rows.
// vpmaddubsw multiplies unsigned weight bytes by signed activation bytes into int16 pair sums
// (no overflow: |w| <= 128, |a| <= 127), vpmaddwd by ones widens them to int32; each block's
// int32 lanes are converted to float and scaled with one FMA, and the horizontal sum happens
// once per row. Signed weights (Q4_0, Q5_0, Q8_0) enter as |w| with the activation's sign
// flipped where w < 0 (vpsignb). Blocks go two at a time so that their fp16 scales convert in
// one instruction.
//
// Only intrinsics and this folder's internal-linkage helpers are used here (see
// quant_avx2_common.h).
#include <immintrin.h>

#include "backend/cpu/quant/quant_avx2_common.h"
#include "backend/cpu/quant/quant_internal.h"
#include "quant/block_formats.h"

namespace folio::cpu::quant {
namespace {

using namespace avx2;

// ---- weight unpacking: one block -> 32 values in element order ----------------------------------

inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i q = load128(qs);
  const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

// 16 where bit j of the 32-bit qh is set, for byte j.
inline __m256i high_bits_to_16(const uint8_t* qh) {
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(load_u32(qh))),
                          _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(16));
}

struct Q4_0Weights {
  static constexpr size_t kBytes = sizeof(BlockQ4_0);
  static __m256i signed_one(const uint8_t* w) { return _mm256_sub_epi8(unpack_nibbles(w + 2), _mm256_set1_epi8(8)); }
};

struct Q5_0Weights {
  static constexpr size_t kBytes = sizeof(BlockQ5_0);
  static __m256i signed_one(const uint8_t* w) {
    const __m256i q = _mm256_or_si256(unpack_nibbles(w + 6), high_bits_to_16(w + 2));
    return _mm256_sub_epi8(q, _mm256_set1_epi8(16));
  }
};

struct Q8_0Weights {
  static constexpr size_t kBytes = sizeof(BlockQ8_0);
  static __m256i signed_one(const uint8_t* w) { return load256(w + 2); }
};

struct Q4_1Weights {
  static constexpr size_t kBytes = sizeof(BlockQ4_1);
  static __m256i unsigned_one(const uint8_t* w) { return unpack_nibbles(w + 4); }
};

struct Q5_1Weights {
  static constexpr size_t kBytes = sizeof(BlockQ5_1);
  static __m256i unsigned_one(const uint8_t* w) {
    return _mm256_or_si256(unpack_nibbles(w + 8), high_bits_to_16(w + 4));
  }
};

// ---- dot products -------------------------------------------------------------------------------

inline __m256 block_products(__m256i unsigned_w, __m256i signed_a) {
  const __m256i pairs = _mm256_maddubs_epi16(unsigned_w, signed_a);
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}

// Lane `i` of a 128-bit vector in all 8 lanes.
template <int i>
inline __m256 lane(__m128 v) {
  if constexpr (i == 0) {
    return _mm256_broadcastss_ps(v);
  } else {
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(v), _mm256_set1_epi32(i));
  }
}

// Every row is computed by the same sequence of operations whatever num_rows is and wherever
// the row sits among them, so results never depend on how rows are batched. A pair of blocks
// is summed apart from the accumulator (mul, fma) and then added: one add per pair on the
// accumulator's dependency chain instead of two FMAs.

template <typename W>
struct SymmetricDot {
  template <int R>
  static void run(int64_t n, const uint8_t* w, const uint8_t* act, size_t stride, float* out) {
    constexpr size_t kA = sizeof(BlockQ8_0);
    const int64_t nb = n / kQK;
    __m256 acc[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      const uint8_t* wb = w + b * W::kBytes;
      const __m256i ws0 = W::signed_one(wb);
      const __m256i ws1 = W::signed_one(wb + W::kBytes);
      const __m256i wabs0 = _mm256_abs_epi8(ws0);
      const __m256i wabs1 = _mm256_abs_epi8(ws1);
      const __m128 dw = half2_to_float(load_u16(wb), load_u16(wb + W::kBytes));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const uint8_t* ab = act + r * stride + b * kA;
        const __m128 scale = _mm_mul_ps(dw, half2_to_float(load_u16(ab), load_u16(ab + kA)));
        const __m256 p0 = block_products(wabs0, _mm256_sign_epi8(load256(ab + 2), ws0));
        const __m256 p1 = block_products(wabs1, _mm256_sign_epi8(load256(ab + kA + 2), ws1));
        acc[r] = _mm256_add_ps(acc[r], _mm256_fmadd_ps(p1, lane<1>(scale), _mm256_mul_ps(p0, lane<0>(scale))));
      }
    }
    float tail[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) tail[r] = 0.0f;
    if (b < nb) {
      const uint8_t* wb = w + b * W::kBytes;
      const __m256i ws = W::signed_one(wb);
      const __m256i wabs = _mm256_abs_epi8(ws);
      const float dw = half_to_float(load_u16(wb));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const uint8_t* ab = act + r * stride + b * kA;
        const __m256i pairs = _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(load256(ab + 2), ws));
        const int dot = hsum_epi32(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
        tail[r] = static_cast<float>(dot) * (dw * half_to_float(load_u16(ab)));
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) out[r] = hsum_ps(acc[r]) + tail[r];
  }
};

template <typename W>
struct AffineDot {
  template <int R>
  static void run(int64_t n, const uint8_t* w, const uint8_t* act, size_t stride, float* out) {
    constexpr size_t kA = sizeof(BlockQ8_1);
    const int64_t nb = n / kQK;
    __m256 acc[R];
    __m128 acc_min[R];  // lanes 1 and 3: m_w * s_a
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      acc[r] = _mm256_setzero_ps();
      acc_min[r] = _mm_setzero_ps();
    }
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      const uint8_t* wb = w + b * W::kBytes;
      const __m256i q0 = W::unsigned_one(wb);
      const __m256i q1 = W::unsigned_one(wb + W::kBytes);
      const __m128 dm = half4_to_float(load_u32(wb), load_u32(wb + W::kBytes));  // d0 m0 d1 m1
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const uint8_t* ab = act + r * stride + b * kA;
        const __m128 scale = _mm_mul_ps(dm, half4_to_float(load_u32(ab), load_u32(ab + kA)));
        acc_min[r] = _mm_add_ps(acc_min[r], scale);
        const __m256 p0 = block_products(q0, load256(ab + 4));
        const __m256 p1 = block_products(q1, load256(ab + kA + 4));
        acc[r] = _mm256_add_ps(acc[r], _mm256_fmadd_ps(p1, lane<2>(scale), _mm256_mul_ps(p0, lane<0>(scale))));
      }
    }
    float tail[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) tail[r] = 0.0f;
    if (b < nb) {
      const uint8_t* wb = w + b * W::kBytes;
      const __m256i q = W::unsigned_one(wb);
      const float dw = half_to_float(load_u16(wb));
      const float mw = half_to_float(load_u16(wb + 2));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const uint8_t* ab = act + r * stride + b * kA;
        const __m256i pairs = _mm256_maddubs_epi16(q, load256(ab + 4));
        const int dot = hsum_epi32(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
        tail[r] = static_cast<float>(dot) * (dw * half_to_float(load_u16(ab))) + mw * half_to_float(load_u16(ab + 2));
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m128 mins = _mm_add_ps(acc_min[r], _mm_movehl_ps(acc_min[r], acc_min[r]));
      out[r] = hsum_ps(acc[r]) + _mm_cvtss_f32(_mm_shuffle_ps(mins, mins, 1)) + tail[r];
    }
  }
};

// ---- dequantization -----------------------------------------------------------------------------

// 32 values (int8 if is_signed, else uint8) -> d * q (+ m if affine), without FMA.
inline void store_block(__m256i q, bool is_signed, float d, const float* m, float* dst) {
  const __m256 vd = _mm256_set1_ps(d);
  for (int k = 0; k < 4; ++k) {
    const __m128i bytes = k < 2 ? _mm256_castsi256_si128(q) : _mm256_extracti128_si256(q, 1);
    const __m128i eight = (k & 1) ? _mm_srli_si128(bytes, 8) : bytes;
    const __m256i ints = is_signed ? _mm256_cvtepi8_epi32(eight) : _mm256_cvtepu8_epi32(eight);
    __m256 y = _mm256_mul_ps(vd, _mm256_cvtepi32_ps(ints));
    if (m != nullptr) y = _mm256_add_ps(keep_rounded(y), _mm256_set1_ps(*m));
    _mm256_storeu_ps(dst + 8 * k, y);
  }
}

template <typename W>
void dequantize_symmetric(const void* src, float* dst, int64_t n) {
  const auto* w = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const uint8_t* wb = w + b * W::kBytes;
    store_block(W::signed_one(wb), true, half_to_float(load_u16(wb)), nullptr, dst + b * kQK);
  }
}

template <typename W>
void dequantize_affine(const void* src, float* dst, int64_t n) {
  const auto* w = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const uint8_t* wb = w + b * W::kBytes;
    const float m = half_to_float(load_u16(wb + 2));
    store_block(W::unsigned_one(wb), false, half_to_float(load_u16(wb)), &m, dst + b * kQK);
  }
}

// ---- activation conversion ----------------------------------------------------------------------

// q = round_half_even(x / d), d = max|x| / 127, for one block of 32; returns d and the sum of q.
inline float quantize_block_q8(const float* x, int8_t* q, int* sum) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps();
  for (int k = 0; k < 4; ++k) {
    v[k] = _mm256_loadu_ps(x + 8 * k);
    amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[k]));
  }
  const float d = hmax_ps(amax) / 127.0f;
  const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
  __m256i qi[4];
  for (int k = 0; k < 4; ++k) qi[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], id));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), pack_32(qi[0], qi[1], qi[2], qi[3]));
  *sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3])));
  return d;
}

void convert_activation_row_q8_0(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_0*>(dst);
  for (int64_t b = 0; b < n / kQK; ++b) {
    int sum;
    y[b].d = float_to_half(quantize_block_q8(src + b * kQK, y[b].qs, &sum));
  }
}

void convert_activation_row_q8_1(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_1*>(dst);
  for (int64_t b = 0; b < n / kQK; ++b) {
    int sum;
    const float d = quantize_block_q8(src + b * kQK, y[b].qs, &sum);
    y[b].d = float_to_half(d);
    y[b].s = float_to_half(static_cast<float>(sum) * d);
  }
}

// ---- float weights ------------------------------------------------------------------------------

struct F32Weights {
  static __m256 load(const void* w, int64_t i) { return _mm256_loadu_ps(static_cast<const float*>(w) + i); }
  static float at(const void* w, int64_t i) { return static_cast<const float*>(w)[i]; }
};

struct F16Weights {
  static __m256 load(const void* w, int64_t i) { return _mm256_cvtph_ps(load128(static_cast<const uint16_t*>(w) + i)); }
  static float at(const void* w, int64_t i) { return half_to_float(static_cast<const uint16_t*>(w)[i]); }
};

struct BF16Weights {
  static __m256 load(const void* w, int64_t i) {
    const __m256i wide = _mm256_cvtepu16_epi32(load128(static_cast<const uint16_t*>(w) + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static float at(const void* w, int64_t i) {
    const uint32_t bits = static_cast<uint32_t>(static_cast<const uint16_t*>(w)[i]) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
};

template <typename W>
struct FloatDot {
  template <int R>
  static void run(int64_t n, const uint8_t* w, const uint8_t* act, size_t stride, float* out) {
    __m256 acc0[R], acc1[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
    auto row = [&](int r) { return reinterpret_cast<const float*>(act + r * stride); };
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m256 w0 = W::load(w, i);
      const __m256 w1 = W::load(w, i + 8);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        acc0[r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(row(r) + i), acc0[r]);
        acc1[r] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(row(r) + i + 8), acc1[r]);
      }
    }
    for (; i + 8 <= n; i += 8) {
      const __m256 w0 = W::load(w, i);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc0[r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(row(r) + i), acc0[r]);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      float sum = hsum_ps(_mm256_add_ps(acc0[r], acc1[r]));
      for (int64_t j = i; j < n; ++j) sum += W::at(w, j) * row(r)[j];
      out[r] = sum;
    }
  }
};

void dequantize_row_f16(const void* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, F16Weights::load(src, i));
  for (; i < n; ++i) dst[i] = F16Weights::at(src, i);
}

void dequantize_row_bf16(const void* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, BF16Weights::load(src, i));
  for (; i < n; ++i) dst[i] = BF16Weights::at(src, i);
}

}  // namespace

KernelFns avx2_kernel_fns(DType weight_type) {
  switch (weight_type) {
    case DType::F32: return {nullptr, nullptr, dot_rows_by_4<FloatDot<F32Weights>>};
    case DType::F16: return {dequantize_row_f16, nullptr, dot_rows_by_4<FloatDot<F16Weights>>};
    case DType::BF16: return {dequantize_row_bf16, nullptr, dot_rows_by_4<FloatDot<BF16Weights>>};
    case DType::Q4_0:
      return {dequantize_symmetric<Q4_0Weights>, convert_activation_row_q8_0, dot_rows_by_4<SymmetricDot<Q4_0Weights>>};
    case DType::Q5_0:
      return {dequantize_symmetric<Q5_0Weights>, convert_activation_row_q8_0, dot_rows_by_4<SymmetricDot<Q5_0Weights>>};
    case DType::Q8_0:
      return {dequantize_symmetric<Q8_0Weights>, convert_activation_row_q8_0, dot_rows_by_4<SymmetricDot<Q8_0Weights>>};
    case DType::Q4_1:
      return {dequantize_affine<Q4_1Weights>, convert_activation_row_q8_1, dot_rows_by_4<AffineDot<Q4_1Weights>>};
    case DType::Q5_1:
      return {dequantize_affine<Q5_1Weights>, convert_activation_row_q8_1, dot_rows_by_4<AffineDot<Q5_1Weights>>};
    default: return avx2_kernel_fns_k(weight_type);
  }
}

}  // namespace folio::cpu::quant
