// AVX-512 (F, BW, VL, DQ, VNNI) kernels for the float types and the 32-element block types.
// Compiled with AVX-512 flags; reached only through quant_kernels.cpp's CPU check.
//
// Dot products take the weight blocks two at a time: one 512-bit register holds 64 weights
// (block b in the low half, b+1 in the high half), unpacked once and used for every activation
// row. vpdpbusd multiplies unsigned weight bytes by signed activation bytes and sums groups of
// four into 16 int32 lanes (8 per block); those are converted to float and scaled per block
// with one FMA, so the horizontal sum happens once per row, at the end. Signed weights (Q4_0,
// Q5_0, Q8_0) enter vpdpbusd as |w| with the activation's sign flipped where w < 0.
//
// Only intrinsics and this folder's internal-linkage helpers are used here: an inline function
// shared with the files compiled without AVX-512 could be emitted from this file with AVX-512
// instructions and picked by the linker for all of them.
#include "backend/cpu/quant/quant_avx512_common.h"  // first: it sets a diagnostic pragma

#include <immintrin.h>

#include <cstring>
#include "backend/cpu/quant/quant_internal.h"
#include "quant/block_formats.h"

namespace folio::cpu::quant {
namespace {

using namespace avx512;

// ---- weight unpacking: two consecutive blocks -> 64 values, element order ----------------------

// Nibbles of two blocks whose qs start `qs_offset` bytes into blocks `bytes` apart: the low half
// holds block 0's low nibbles then its high nibbles (elements 0-15, 16-31), the high half block 1's.
inline __m512i unpack_nibble_pair(const uint8_t* w, size_t bytes, size_t qs_offset) {
  __m512i z = _mm512_broadcast_i32x4(load128(w + qs_offset));
  z = _mm512_mask_broadcast_i32x4(z, 0xff00, load128(w + bytes + qs_offset));
  const __m512i shifts = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
  return _mm512_and_si512(_mm512_srlv_epi64(z, shifts), _mm512_set1_epi8(0x0f));
}

// Adds 16 where the block's qh bit is set (Q5 types); qh of block 1 is `bytes` after block 0's.
inline __m512i add_high_bit_pair(__m512i q, const uint8_t* qh0, size_t bytes) {
  const __mmask64 high = static_cast<__mmask64>(load_u32(qh0)) | (static_cast<__mmask64>(load_u32(qh0 + bytes)) << 32);
  return _mm512_mask_add_epi8(q, high, q, _mm512_set1_epi8(16));
}

// Single-block variants (a row's odd last block): 32 values in a 256-bit register.
inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i q = load128(qs);
  const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

inline __m256i add_high_bit(__m256i q, const uint8_t* qh) {
  return _mm256_mask_add_epi8(q, static_cast<__mmask32>(load_u32(qh)), q, _mm256_set1_epi8(16));
}

// Per-type weight access. signed_pair/signed_one give int8 weights (symmetric types);
// unsigned_pair/unsigned_one give 0..31 values (affine types, whose m is 2 bytes after d).
struct Q4_0Weights {
  static constexpr size_t kBytes = sizeof(BlockQ4_0);
  static __m512i signed_pair(const uint8_t* w) {
    return _mm512_sub_epi8(unpack_nibble_pair(w, kBytes, 2), _mm512_set1_epi8(8));
  }
  static __m256i signed_one(const uint8_t* w) { return _mm256_sub_epi8(unpack_nibbles(w + 2), _mm256_set1_epi8(8)); }
};

struct Q5_0Weights {
  static constexpr size_t kBytes = sizeof(BlockQ5_0);
  static __m512i signed_pair(const uint8_t* w) {
    const __m512i q = add_high_bit_pair(unpack_nibble_pair(w, kBytes, 6), w + 2, kBytes);
    return _mm512_sub_epi8(q, _mm512_set1_epi8(16));
  }
  static __m256i signed_one(const uint8_t* w) {
    return _mm256_sub_epi8(add_high_bit(unpack_nibbles(w + 6), w + 2), _mm256_set1_epi8(16));
  }
};

struct Q8_0Weights {
  static constexpr size_t kBytes = sizeof(BlockQ8_0);
  static __m512i signed_pair(const uint8_t* w) { return load_pair256(w + 2, w + kBytes + 2); }
  static __m256i signed_one(const uint8_t* w) { return load256(w + 2); }
};

struct Q4_1Weights {
  static constexpr size_t kBytes = sizeof(BlockQ4_1);
  static __m512i unsigned_pair(const uint8_t* w) { return unpack_nibble_pair(w, kBytes, 4); }
  static __m256i unsigned_one(const uint8_t* w) { return unpack_nibbles(w + 4); }
};

struct Q5_1Weights {
  static constexpr size_t kBytes = sizeof(BlockQ5_1);
  static __m512i unsigned_pair(const uint8_t* w) {
    return add_high_bit_pair(unpack_nibble_pair(w, kBytes, 8), w + 4, kBytes);
  }
  static __m256i unsigned_one(const uint8_t* w) { return add_high_bit(unpack_nibbles(w + 8), w + 4); }
};

// ---- dot products -------------------------------------------------------------------------------

// Lanes 0-7 take element i of a 256-bit vector, lanes 8-15 element j.
inline __m512 spread_lanes(__m256 v, int i, int j) {
  const __m512i index = _mm512_set_epi32(j, j, j, j, j, j, j, j, i, i, i, i, i, i, i, i);
  return _mm512_permutexvar_ps(index, _mm512_castps256_ps512(v));
}

// Every row is computed by the same sequence of operations whatever num_rows is and wherever
// the row sits among them, so results never depend on how rows are batched. Blocks go four at
// a time (their fp16 scales convert in one instruction); the two pairs of a quad feed two
// accumulators, which keeps the FMA latency off the critical path when rows are few.

// Symmetric weights (d only) against Q8_0 activations (34-byte blocks, d then 32 int8).
template <typename W>
struct SymmetricDot {
  static constexpr size_t kA = sizeof(BlockQ8_0);

  // The 4 fp16 scales of blocks at p, p + stride, ... -> floats.
  static __m128 scales4(const uint8_t* p, size_t stride) {
    const uint64_t bits = load_u16(p) | (static_cast<uint64_t>(load_u16(p + stride)) << 16) |
                          (static_cast<uint64_t>(load_u16(p + 2 * stride)) << 32) |
                          (static_cast<uint64_t>(load_u16(p + 3 * stride)) << 48);
    return _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(bits)));
  }

  // |w| and the mask of negative w: vpdpbusd takes unsigned weights.
  struct Pair {
    __m512i magnitude;
    __mmask64 negative;
    explicit Pair(__m512i w) : magnitude(_mm512_abs_epi8(w)), negative(_mm512_movepi8_mask(w)) {}
    __m512 dot(const uint8_t* a0, const uint8_t* a1) const {
      __m512i a = load_pair256(a0, a1);
      a = _mm512_mask_sub_epi8(a, negative, _mm512_setzero_si512(), a);
      return _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), magnitude, a));
    }
  };

  template <int R>
  static void run(int64_t n, const uint8_t* w, const uint8_t* act, size_t stride, float* out) {
    const int64_t nb = n / kQK;
    __m512 acc0[R], acc1[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) {
      const uint8_t* wb = w + b * W::kBytes;
      const Pair p0(W::signed_pair(wb));
      const Pair p1(W::signed_pair(wb + 2 * W::kBytes));
      const __m128 dw = scales4(wb, W::kBytes);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const uint8_t* ab = act + r * stride + b * kA;
        const __m256 scale = _mm256_castps128_ps256(_mm_mul_ps(dw, scales4(ab, kA)));
        acc0[r] = _mm512_fmadd_ps(p0.dot(ab + 2, ab + kA + 2), spread_lanes(scale, 0, 1), acc0[r]);
        acc1[r] = _mm512_fmadd_ps(p1.dot(ab + 2 * kA + 2, ab + 3 * kA + 2), spread_lanes(scale, 2, 3), acc1[r]);
      }
    }
    if (b + 2 <= nb) {
      const uint8_t* wb = w + b * W::kBytes;
      const Pair p0(W::signed_pair(wb));
      const __m128 dw = half2_to_float(load_u16(wb), load_u16(wb + W::kBytes));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const uint8_t* ab = act + r * stride + b * kA;
        const __m128 scale = _mm_mul_ps(dw, half2_to_float(load_u16(ab), load_u16(ab + kA)));
        acc0[r] =
            _mm512_fmadd_ps(p0.dot(ab + 2, ab + kA + 2), spread_lanes(_mm256_castps128_ps256(scale), 0, 1), acc0[r]);
      }
      b += 2;
    }
    float tail[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) tail[r] = 0.0f;
    if (b < nb) {
      const uint8_t* wb = w + b * W::kBytes;
      const __m256i ws = W::signed_one(wb);
      const __m256i wabs = _mm256_abs_epi8(ws);
      const __mmask32 negative = _mm256_movepi8_mask(ws);
      const float dw = half_to_float(load_u16(wb));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const uint8_t* ab = act + r * stride + b * kA;
        __m256i a = load256(ab + 2);
        a = _mm256_mask_sub_epi8(a, negative, _mm256_setzero_si256(), a);
        const int dot = hsum_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), wabs, a));
        tail[r] = static_cast<float>(dot) * (dw * half_to_float(load_u16(ab)));
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r])) + tail[r];
  }
};

// Affine weights (d and m) against Q8_1 activations (36-byte blocks: d, s, 32 int8):
// dot = sum over blocks of d_w d_a sum(q_w q_a) + m_w s_a.
template <typename W>
struct AffineDot {
  static constexpr size_t kA = sizeof(BlockQ8_1);

  static __m512 dot(__m512i q, const uint8_t* a0, const uint8_t* a1) {
    return _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q, load_pair256(a0, a1)));
  }

  // The (d, m) or (d, s) fp16 pairs of 4 blocks at p, p + stride, ... -> 8 floats.
  static __m256 scales4(const uint8_t* p, size_t stride) {
    return half8_to_float(load_u32(p), load_u32(p + stride), load_u32(p + 2 * stride), load_u32(p + 3 * stride));
  }

  template <int R>
  static void run(int64_t n, const uint8_t* w, const uint8_t* act, size_t stride, float* out) {
    const int64_t nb = n / kQK;
    __m512 acc0[R], acc1[R];
    __m256 acc_min[R];  // odd lanes: m_w * s_a
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      acc0[r] = acc1[r] = _mm512_setzero_ps();
      acc_min[r] = _mm256_setzero_ps();
    }
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) {
      const uint8_t* wb = w + b * W::kBytes;
      const __m512i q0 = W::unsigned_pair(wb);
      const __m512i q1 = W::unsigned_pair(wb + 2 * W::kBytes);
      const __m256 dm = scales4(wb, W::kBytes);  // d0 m0 d1 m1 d2 m2 d3 m3
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const uint8_t* ab = act + r * stride + b * kA;
        const __m256 scale = _mm256_mul_ps(dm, scales4(ab, kA));
        acc_min[r] = _mm256_add_ps(acc_min[r], scale);
        acc0[r] = _mm512_fmadd_ps(dot(q0, ab + 4, ab + kA + 4), spread_lanes(scale, 0, 2), acc0[r]);
        acc1[r] = _mm512_fmadd_ps(dot(q1, ab + 2 * kA + 4, ab + 3 * kA + 4), spread_lanes(scale, 4, 6), acc1[r]);
      }
    }
    if (b + 2 <= nb) {
      const uint8_t* wb = w + b * W::kBytes;
      const __m512i q0 = W::unsigned_pair(wb);
      const __m128 dm = half4_to_float(load_u32(wb), load_u32(wb + W::kBytes));  // d0 m0 d1 m1
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const uint8_t* ab = act + r * stride + b * kA;
        const __m256 scale = _mm256_zextps128_ps256(_mm_mul_ps(dm, half4_to_float(load_u32(ab), load_u32(ab + kA))));
        acc_min[r] = _mm256_add_ps(acc_min[r], scale);
        acc0[r] = _mm512_fmadd_ps(dot(q0, ab + 4, ab + kA + 4), spread_lanes(scale, 0, 2), acc0[r]);
      }
      b += 2;
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
        const int dot = hsum_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), q, load256(ab + 4)));
        tail[r] = static_cast<float>(dot) * (dw * half_to_float(load_u16(ab))) + mw * half_to_float(load_u16(ab + 2));
      }
    }
    const __m256 odd = _mm256_castsi256_ps(_mm256_set_epi32(-1, 0, -1, 0, -1, 0, -1, 0));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 mins = _mm512_zextps256_ps512(_mm256_and_ps(acc_min[r], odd));
      out[r] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0[r], acc1[r]), mins)) + tail[r];
    }
  }
};

// ---- dequantization -----------------------------------------------------------------------------

// 32 int8 / uint8 values times d (plus m), stored as 32 floats.
inline void store_scaled(const __m256i q, bool is_signed, float d, float* dst) {
  const __m128i lo = _mm256_castsi256_si128(q);
  const __m128i hi = _mm256_extracti128_si256(q, 1);
  const __m512 vd = _mm512_set1_ps(d);
  const __m512i q0 = is_signed ? _mm512_cvtepi8_epi32(lo) : _mm512_cvtepu8_epi32(lo);
  const __m512i q1 = is_signed ? _mm512_cvtepi8_epi32(hi) : _mm512_cvtepu8_epi32(hi);
  _mm512_storeu_ps(dst, _mm512_mul_ps(vd, _mm512_cvtepi32_ps(q0)));
  _mm512_storeu_ps(dst + 16, _mm512_mul_ps(vd, _mm512_cvtepi32_ps(q1)));
}

inline void store_affine(const __m256i q, float d, float m, float* dst) {
  const __m512 vd = _mm512_set1_ps(d);
  const __m512 vm = _mm512_set1_ps(m);
  const __m512 f0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(q)));
  const __m512 f1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(q, 1)));
  _mm512_storeu_ps(dst, _mm512_add_ps(keep_rounded(_mm512_mul_ps(vd, f0)), vm));
  _mm512_storeu_ps(dst + 16, _mm512_add_ps(keep_rounded(_mm512_mul_ps(vd, f1)), vm));
}

template <typename W>
void dequantize_symmetric(const void* src, float* dst, int64_t n) {
  const auto* w = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const uint8_t* wb = w + b * W::kBytes;
    store_scaled(W::signed_one(wb), true, half_to_float(load_u16(wb)), dst + b * kQK);
  }
}

template <typename W>
void dequantize_affine(const void* src, float* dst, int64_t n) {
  const auto* w = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const uint8_t* wb = w + b * W::kBytes;
    store_affine(W::unsigned_one(wb), half_to_float(load_u16(wb)), half_to_float(load_u16(wb + 2)), dst + b * kQK);
  }
}

// ---- activation conversion ----------------------------------------------------------------------

// q = round_half_even(x / d) for one block of 32, d = max|x| / 127; returns d, stores q and
// the sum of q.
inline float quantize_block_q8(const float* x, int8_t* q, int* sum) {
  const __m512 x0 = _mm512_loadu_ps(x);
  const __m512 x1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
  const float d = amax / 127.0f;
  const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
  const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, id));
  const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, id));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(q0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm512_cvtsepi32_epi8(q1));
  *sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
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
  static __m512 load(const void* w, int64_t i) { return _mm512_loadu_ps(static_cast<const float*>(w) + i); }
  static __m512 load_masked(const void* w, int64_t i, __mmask16 k) {
    return _mm512_maskz_loadu_ps(k, static_cast<const float*>(w) + i);
  }
};

struct F16Weights {
  static __m512 load(const void* w, int64_t i) { return _mm512_cvtph_ps(load256(static_cast<const uint16_t*>(w) + i)); }
  static __m512 load_masked(const void* w, int64_t i, __mmask16 k) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, static_cast<const uint16_t*>(w) + i));
  }
};

struct BF16Weights {
  static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static __m512 load(const void* w, int64_t i) { return widen(load256(static_cast<const uint16_t*>(w) + i)); }
  static __m512 load_masked(const void* w, int64_t i, __mmask16 k) {
    return widen(_mm256_maskz_loadu_epi16(k, static_cast<const uint16_t*>(w) + i));
  }
};

template <typename W>
struct FloatDot {
  template <int R>
  static void run(int64_t n, const uint8_t* w, const uint8_t* act, size_t stride, float* out) {
    // Two accumulators per row hide the FMA latency when R is small.
    __m512 acc0[R], acc1[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
    auto row = [&](int r) { return reinterpret_cast<const float*>(act + r * stride); };
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      const __m512 w0 = W::load(w, i);
      const __m512 w1 = W::load(w, i + 16);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        acc0[r] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(row(r) + i), acc0[r]);
        acc1[r] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(row(r) + i + 16), acc1[r]);
      }
    }
    for (; i < n; i += 16) {
      const __mmask16 k = n - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - i)) - 1);
      const __m512 w0 = W::load_masked(w, i, k);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        acc0[r] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(k, row(r) + i), acc0[r]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r]));
  }
};

void dequantize_row_f16(const void* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, F16Weights::load(src, i));
  if (i < n) {
    const __mmask16 k = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(dst + i, k, F16Weights::load_masked(src, i, k));
  }
}

void dequantize_row_bf16(const void* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, BF16Weights::load(src, i));
  if (i < n) {
    const __mmask16 k = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(dst + i, k, BF16Weights::load_masked(src, i, k));
  }
}

}  // namespace

KernelFns avx512_kernel_fns(DType weight_type) {
  switch (weight_type) {
    case DType::F32: return {nullptr, nullptr, dot_rows_by_8<FloatDot<F32Weights>>};
    case DType::F16: return {dequantize_row_f16, nullptr, dot_rows_by_8<FloatDot<F16Weights>>};
    case DType::BF16: return {dequantize_row_bf16, nullptr, dot_rows_by_8<FloatDot<BF16Weights>>};
    case DType::Q4_0:
      return {dequantize_symmetric<Q4_0Weights>, convert_activation_row_q8_0, dot_rows_by_8<SymmetricDot<Q4_0Weights>>};
    case DType::Q5_0:
      return {dequantize_symmetric<Q5_0Weights>, convert_activation_row_q8_0, dot_rows_by_8<SymmetricDot<Q5_0Weights>>};
    case DType::Q8_0:
      return {dequantize_symmetric<Q8_0Weights>, convert_activation_row_q8_0, dot_rows_by_8<SymmetricDot<Q8_0Weights>>};
    case DType::Q4_1:
      return {dequantize_affine<Q4_1Weights>, convert_activation_row_q8_1, dot_rows_by_8<AffineDot<Q4_1Weights>>};
    case DType::Q5_1:
      return {dequantize_affine<Q5_1Weights>, convert_activation_row_q8_1, dot_rows_by_8<AffineDot<Q5_1Weights>>};
    default: return avx512_kernel_fns_k(weight_type);
  }
}

}  // namespace folio::cpu::quant
