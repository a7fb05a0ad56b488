// panel_gemm.h on AVX2 (with FMA and F16C): the same packed panels, activation terms and float
// folds as the AVX-512 / AMX file, so a row's result has the same bits on every ISA that runs
// panels. Compiled with -mavx2 -mfma -mf16c (CMake, by the _avx2 suffix). Intrinsics and
// internal-linkage helpers only (quant/README.md).
//
// AVX2 has no VNNI: a block's integer dot products come from vpmaddubsw (unsigned code x signed
// activation, adjacent pairs summed to 16 bits) and vpmaddwd (pairs of those to 32 bits). A pair
// of 4-bit codes times activations in [-127, 127] stays under 2 x 15 x 127 = 3,810, so nothing
// saturates; Q8_0's 8-bit codes (c = q + 128, up to 255) would, so they go in as two nibbles,
// dot(c, a) = 16 dot(c >> 4, a) + dot(c & 15, a). Every sum is exact, so the integers are
// vpdpbusd's and the folds that follow are the same operations in the same order.
//
// Register blocking: four activation rows share each loaded block of codes (the panel's 16
// weight rows, two 8-lane halves); their 32-bit block sums live in registers and their float
// sums in a small L1 array, folded once a block (the scales change every 32 inputs).
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/quant/panel_gemm.h"
#include "backend/cpu/quant/panel_layout.h"

namespace folio::cpu {
namespace {

constexpr int kPanelRows = kPanelWeightRows;
constexpr int kTileRows = kPanelTermRows;
constexpr int kBlock = kPanelBlock;
constexpr int kRowsAtOnce = 4;
constexpr int kPrefetchBlocks = 12;

using Layout = PanelLayout;

// Panel rows [r0, r0 + 16), every block, into the packed layout (panel_gemm_amx.cpp's comment):
// dword j of the 16 rows side by side, 64 bytes a j; then the rows' fp16 scales (and minimums).
void pack_panel(const Layout& l, const uint8_t* weights, size_t row_bytes, int64_t r0, int64_t blocks, uint8_t* out) {
  const size_t stride = panel_packed_block_bytes(l), codes = panel_packed_codes_bytes(l);
  const int dwords = l.four_bit ? 4 : 8;
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* block = out + b * stride;
    for (int n = 0; n < kPanelRows; ++n) {
      const uint8_t* src = weights + (r0 + n) * row_bytes + b * l.weight_block_bytes;
      for (int j = 0; j < dwords; ++j) {
        uint8_t* dst = block + 64 * j + 4 * n;
        std::memcpy(dst, src + l.weight_codes_offset + 4 * j, 4);
        if (!l.four_bit) {
          for (int k = 0; k < 4; ++k) dst[k] ^= 0x80;  // signed bytes + 128 = unsigned codes
        }
      }
      std::memcpy(block + codes + 2 * n, src, 2);
      if (l.offset == 0) std::memcpy(block + codes + 2 * kPanelRows + 2 * n, src + 2, 2);
    }
    if (l.high_bits_offset >= 0) {
      const uint8_t* rows[kPanelRows];
      for (int n = 0; n < kPanelRows; ++n) rows[n] = weights + (r0 + n) * row_bytes + b * l.weight_block_bytes;
      panel_high_bits(l, rows, block + 256);
    }
  }
}

// Where block b's activation codes start in a row: Q6_K's 16-input blocks read halves of Q8_0's.
// kSix at compile time, as every loop below takes it: 32-input blocks are plain strides.
template <bool kSix>
__attribute__((always_inline)) inline size_t act_of(const Layout& l, int64_t b) {
  if constexpr (!kSix) return static_cast<size_t>(b) * l.act_block_bytes + l.act_codes_offset;
  const auto first = static_cast<size_t>(b) * static_cast<size_t>(l.block_inputs);
  return (first / kBlock) * l.act_block_bytes + l.act_codes_offset + first % kBlock;
}

// 32 bits of a plane of bits (Q5's fifth, Q6_K's fifth and sixth) -> 32 bytes, `value` where
// the bit is set: byte i of the broadcast word goes to lanes 8i..8i+7 (vpshufb stays within
// 128-bit halves, each of which holds the whole word), and each lane tests its own bit.
__attribute__((always_inline)) inline __m256i plane_bits(const uint8_t* bits, char value) {
  int32_t word;
  std::memcpy(&word, bits, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(word),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(value));
}

// The 16 lanes' exact dot products of one block for R activation rows: sums[r][half], half 0
// the panel's rows 0-7. a[r]: row r's block codes.
template <int R, bool kSix>
__attribute__((always_inline)) inline void block_dots(const Layout& l, const uint8_t* block, const uint8_t* const* a,
                                                      __m256i (&sums)[R][2]) {
  const __m256i low = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i sixteens = _mm256_set1_epi16(16);
  for (int r = 0; r < R; ++r) sums[r][0] = sums[r][1] = _mm256_setzero_si256();
  if constexpr (kSix) {
    // Q6_K's 16 inputs: nibble vector v holds code vectors v (low) and v + 2 (high); the planes
    // add bits 4 and 5. Codes up to 63 keep vpmaddubsw's pairs below 2 x 63 x 127.
    for (int v = 0; v < 2; ++v) {
      const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 64 * v));
      const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 64 * v + 32));
      __m256i c[2][2] = {
          {_mm256_and_si256(v0, low), _mm256_and_si256(v1, low)},
          {_mm256_and_si256(_mm256_srli_epi16(v0, 4), low), _mm256_and_si256(_mm256_srli_epi16(v1, 4), low)}};
      for (int k = 0; k < 2; ++k) {
        const int j = v + 2 * k;  // the code vector
        for (int half = 0; half < 2; ++half) {
          c[k][half] = _mm256_or_si256(c[k][half], plane_bits(block + 128 + 8 * j + 4 * half, 16));
          c[k][half] = _mm256_or_si256(c[k][half], plane_bits(block + 160 + 8 * j + 4 * half, 32));
        }
        for (int r = 0; r < R; ++r) {
          int32_t word;
          std::memcpy(&word, a[r] + 4 * j, 4);
          const __m256i x = _mm256_set1_epi32(word);
          sums[r][0] = _mm256_add_epi32(sums[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(c[k][0], x), ones));
          sums[r][1] = _mm256_add_epi32(sums[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(c[k][1], x), ones));
        }
      }
    }
    return;
  }
  for (int j = 0; j < (l.four_bit ? 4 : 8); ++j) {
    const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 64 * j));
    const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 64 * j + 32));
    __m256i lo0 = _mm256_and_si256(v0, low), lo1 = _mm256_and_si256(v1, low);
    __m256i hi0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), low);
    __m256i hi1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), low);
    if (l.high_bits_offset >= 0) {
      // Q5: code vectors j (low nibbles) and j + 4 (high nibbles) get their fifth bits; codes
      // up to 31 keep vpmaddubsw's pairs below 2 x 31 x 127, so nothing saturates.
      const uint8_t* plane = block + 256;
      lo0 = _mm256_or_si256(lo0, plane_bits(plane + 8 * j, 16));
      lo1 = _mm256_or_si256(lo1, plane_bits(plane + 8 * j + 4, 16));
      hi0 = _mm256_or_si256(hi0, plane_bits(plane + 8 * (j + 4), 16));
      hi1 = _mm256_or_si256(hi1, plane_bits(plane + 8 * (j + 4) + 4, 16));
    }
    for (int r = 0; r < R; ++r) {
      int32_t word;
      if (l.four_bit) {
        // Low nibbles are inputs 4j..4j+3, high nibbles 4(j + 4)..: two activation words.
        std::memcpy(&word, a[r] + 4 * j, 4);
        const __m256i x = _mm256_set1_epi32(word);
        std::memcpy(&word, a[r] + 4 * (j + 4), 4);
        const __m256i y = _mm256_set1_epi32(word);
        sums[r][0] = _mm256_add_epi32(sums[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(lo0, x), ones));
        sums[r][1] = _mm256_add_epi32(sums[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(lo1, x), ones));
        sums[r][0] = _mm256_add_epi32(sums[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(hi0, y), ones));
        sums[r][1] = _mm256_add_epi32(sums[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(hi1, y), ones));
      } else {
        std::memcpy(&word, a[r] + 4 * j, 4);
        const __m256i x = _mm256_set1_epi32(word);
        sums[r][0] = _mm256_add_epi32(sums[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(lo0, x), ones));
        sums[r][1] = _mm256_add_epi32(sums[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(lo1, x), ones));
        sums[r][0] = _mm256_add_epi32(sums[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(hi0, x), sixteens));
        sums[r][1] = _mm256_add_epi32(sums[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(hi1, x), sixteens));
      }
    }
  }
}

// One block's exact dots into 8 lanes of a row's float sums: the AVX-512 file's `accumulate`,
// lane for lane. scales: the block's 16 rows' fp16 scales (minimums 2 x kPanelRows bytes on),
// or with `wide` float32 ones (the K-quants; minimums 4 x kPanelRows bytes on); half: which 8.
__attribute__((always_inline)) inline __m256 accumulate(__m256 acc, __m256i dots, bool affine, bool wide, bool six,
                                                        const uint8_t* scales, int half, const float* terms) {
  __m256 t = _mm256_cvtepi32_ps(dots);
  if (!affine) t = _mm256_sub_ps(t, _mm256_set1_ps(terms[1]));
  const auto load = [&](size_t offset) {
    return wide ? _mm256_loadu_ps(reinterpret_cast<const float*>(scales + offset) + 8 * half)
                : _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + offset) + half));
  };
  acc = _mm256_fmadd_ps(t, _mm256_mul_ps(load(0), _mm256_set1_ps(terms[0])), acc);
  if (affine) {
    // Q6_K's minimum: its scale times -32 (exact), as the AVX-512 file computes it.
    const __m256 m = six ? _mm256_mul_ps(load(0), _mm256_set1_ps(-32.0f)) : load((wide ? 4 : 2) * kPanelRows);
    acc = _mm256_fmadd_ps(m, _mm256_set1_ps(terms[1]), acc);
  }
  return acc;
}

// R activation rows (m0..m0 + R - 1 of the call, rows act_stride apart) against one packed
// panel; y: row m0's first output of the panel. stream: decode, prefetch the panel ahead.
// kSix: Q6_K's 16-input blocks, known when compiled (a run-time block size in this loop cost
// the 32-input types' prompts ~4%).
template <int R, bool kSix>
void panel_rows_of(const Layout& l, const uint8_t* panel, int64_t blocks, const uint8_t* act, size_t act_stride,
                   const float* terms, int64_t m0, float* y, int64_t y_stride, bool stream) {
  const size_t stride = panel_packed_block_bytes(l), codes = panel_packed_codes_bytes(l);
  const bool affine = l.offset == 0;
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const float* row_terms[R];
  for (int r = 0; r < R; ++r) row_terms[r] = terms + panel_terms_index(blocks, m0 + r, 0);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block = panel + b * stride;
    if (stream) {
      for (size_t line = 0; line <= stride; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(block + kPrefetchBlocks * stride + line), _MM_HINT_T1);
      }
    }
    const uint8_t* a[R];
    for (int r = 0; r < R; ++r) a[r] = act + r * act_stride + act_of<kSix>(l, b);
    __m256i sums[R][2];
    block_dots<R, kSix>(l, block, a, sums);
    const uint8_t* scales = block + codes;
    for (int r = 0; r < R; ++r) {
      const float* t = row_terms[r] + b * 2 * kTileRows;
      acc[r][0] = accumulate(acc[r][0], sums[r][0], affine, l.k_quant, kSix, scales, 0, t);
      acc[r][1] = accumulate(acc[r][1], sums[r][1], affine, l.k_quant, kSix, scales, 1, t);
    }
  }
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(y + r * y_stride, acc[r][0]);
    _mm256_storeu_ps(y + r * y_stride + 8, acc[r][1]);
  }
}

template <int R>
void panel_rows(const Layout& l, const uint8_t* panel, int64_t blocks, const uint8_t* act, size_t act_stride,
                const float* terms, int64_t m0, float* y, int64_t y_stride, bool stream) {
  if (l.six_bit) {
    panel_rows_of<R, true>(l, panel, blocks, act, act_stride, terms, m0, y, y_stride, stream);
  } else {
    panel_rows_of<R, false>(l, panel, blocks, act, act_stride, terms, m0, y, y_stride, stream);
  }
}

}  // namespace

void avx2_pack_panels(DType weight_type, int64_t cols, const uint8_t* weights, int64_t panel_begin, int64_t panel_end,
                      uint8_t* packed) {
  const Layout l = panel_layout_of(weight_type);
  const int64_t blocks = cols / l.block_inputs;
  const size_t panel_bytes = static_cast<size_t>(blocks) * panel_packed_block_bytes(l);
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    uint8_t* out = packed + static_cast<size_t>(p) * panel_bytes;
    if (l.k_quant) {
      panel_pack_k_quant(l, cols, weights, p * kPanelRows, out);
    } else {
      pack_panel(l, weights, static_cast<size_t>(blocks) * l.weight_block_bytes, p * kPanelRows, blocks, out);
    }
  }
}

void avx2_panel_gemm(DType weight_type, int64_t cols, const uint8_t* weights, const uint8_t* packed,
                     const uint8_t* acts, size_t act_row_bytes, const float* terms, int64_t n, int64_t panel_begin,
                     int64_t panel_end, float* y, int64_t y_stride) {
  const Layout l = panel_layout_of(weight_type);
  const int64_t blocks = cols / l.block_inputs;
  const size_t row_bytes = static_cast<size_t>(blocks) * l.weight_block_bytes;
  const size_t panel_bytes = static_cast<size_t>(blocks) * panel_packed_block_bytes(l);
  uint8_t* own = packed == nullptr ? panel_scratch(panel_bytes) : nullptr;
  const bool stream = n < kRowsAtOnce;  // decode: one pass over the panels, read ahead
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    const uint8_t* panel = packed + static_cast<size_t>(p) * panel_bytes;
    if (packed == nullptr) {
      if (l.k_quant) {
        panel_pack_k_quant(l, cols, weights, p * kPanelRows, own);
      } else {
        pack_panel(l, weights, row_bytes, p * kPanelRows, blocks, own);
      }
      panel = own;
    }
    float* out = y + p * kPanelRows;
    int64_t m = 0;
    for (; m + kRowsAtOnce <= n; m += kRowsAtOnce) {
      panel_rows<kRowsAtOnce>(l, panel, blocks, acts + m * act_row_bytes, act_row_bytes, terms, m, out + m * y_stride,
                              y_stride, false);
    }
    for (; m < n; ++m) {
      panel_rows<1>(l, panel, blocks, acts + m * act_row_bytes, act_row_bytes, terms, m, out + m * y_stride, y_stride,
                    stream);
    }
  }
}

}  // namespace folio::cpu
