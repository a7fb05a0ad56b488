// panel_gemm.h on AMX (tiles of 16 activation rows) and AVX-512 VNNI (the remaining rows).
// Compiled with -mamx-tile -mamx-int8 and the AVX-512 flags; reached only once detect_isa()
// has found AMX and obtained the tile state from the OS. Intrinsics and internal-linkage
// helpers only (quant/README.md): no templates or inline functions shared with other files,
// no standard containers.
//
// A packed panel's block b (what decode streams, so exactly the stored bytes, reordered):
//   codes  the 16 rows' codes for inputs 4j..4j+3 side by side, j = 0..7 (the tile B of K = 32,
//          N = 16, and what vpdpbusd reads as 16 lanes): 8 x 64 bytes for Q8_0 (as unsigned
//          bytes); for Q4_0 / Q4_1 / Q5_0 / Q5_1, 4 x 64 bytes whose low nibbles are j = 0..3
//          and high nibbles j = 4..7 (a GGUF byte holds inputs i and i + 16)
//   high   Q5_0 / Q5_1: 8 x 8 bytes, the fifth bits of code vector j's 64 bytes (panel_layout.h)
//   d      [16] fp16: each weight row's block scale
//   m      [16] fp16: Q4_1's and Q5_1's block minimum (absent for Q4_0 / Q5_0 / Q8_0)
// Q6_K's blocks are 16 inputs (panel_layout.h): 128 bytes of nibbles for code vectors j = 0..3,
// the planes of bits 4 and 5, then [16] float32 scales; its tiles are K = 16 (A 16 x 16 int8 at
// the activation block's half, B 4 x 64).
// Q4_0 288 bytes, Q4_1 320, Q5_0 352, Q5_1 384, Q8_0 544 (each the 16 rows' stored size):
// blocks are 32-byte aligned, codes read unaligned. AMX needs a tile's codes as bytes, so
// nibble panels are expanded into the thread's scratch once per call (and met there by every
// tile of activation rows); VNNI rows read the nibbles.
// Tiles: A = 16 activation rows x 32 int8 (read in place, the activation rows' stride), B the
// codes as bytes, C = 16 x 16 int32. Two arrangements: 2 x 2 (A0 A1 for 32 activation rows, B0
// B1 for two panels, C4..C7: each A and B load serves two products), and 1 x 1 for what is left
// (tiles 0, 2, 4 and 1, 3, 5: blocks b and b + 1 in flight).
//
// What bounds it (measured on a Xeon with AMX): a tile multiply costs as much at K = 32 as at
// 64 (~14 cycles), its tilestored as much again, and neither overlaps the AVX-512 folds of the
// stored products into float sums (16 rows x 4-5 vector operations a block); so the folds and
// the store per 16 x 16 block product are the cost, and the arrangements only trim the loads.
// GCC 12 reports its own intrinsics' _mm512_undefined_*() placeholders as used uninitialized
// once inlined into loops (as quant_avx512_common.h notes); the warning is about the header.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstring>

#include "backend/cpu/quant/panel_gemm.h"
#include "backend/cpu/quant/panel_layout.h"
#include "backend/cpu/vector_exp_avx512.h"

namespace folio::cpu {
namespace {

constexpr int kPanelRows = kPanelWeightRows;
constexpr int kTileRows = kPanelTermRows;  // activation rows per AMX tile (M)
constexpr int kBlock = kPanelBlock;
constexpr int kPrefetchBlocks = 12;  // how far ahead VNNI rows prefetch (into L2): ~4-6 KiB

using Layout = PanelLayout;

// Where a tile loop finds a panel's codes (as bytes) and scales, block by block.
struct PanelView {
  const uint8_t* codes;
  size_t codes_stride;
  const uint8_t* scales;
  size_t scales_stride;
};

// Where block b's activation codes start in a row: Q6_K's 16-input blocks read halves of Q8_0's.
__attribute__((always_inline)) inline size_t act_at(const Layout& l, int64_t b) {
  const auto first = static_cast<size_t>(b) * static_cast<size_t>(l.block_inputs);
  return (first / kBlock) * l.act_block_bytes + l.act_codes_offset + first % kBlock;
}
// The same with the block size known when compiled: 32-input blocks are plain strides.
template <bool kSix>
__attribute__((always_inline)) inline size_t act_of(const Layout& l, int64_t b) {
  if constexpr (kSix) return act_at(l, b);
  return static_cast<size_t>(b) * l.act_block_bytes + l.act_codes_offset;
}

// The tile shapes above for blocks of `inputs` (32, or Q6_K's 16), loaded when the thread's
// last configuration was another. ldtilecfg through inline assembly: GCC 12's
// _tile_loadconfig lets the stores that fill the configuration be optimised away.
void configure_tiles(int inputs) {
  static thread_local int configured = 0;
  if (configured == inputs) return;
  alignas(64) uint8_t config[64] = {};
  config[0] = 1;  // palette 1
  auto set = [&](int tile, int rows, int bytes_per_row) {
    config[16 + 2 * tile] = static_cast<uint8_t>(bytes_per_row);
    config[16 + 2 * tile + 1] = static_cast<uint8_t>(bytes_per_row >> 8);
    config[48 + tile] = static_cast<uint8_t>(rows);
  };
  for (int t = 0; t < 2; ++t) {
    set(t, kTileRows, inputs);   // A: 16 rows x 32 (16) int8
    set(2 + t, inputs / 4, 64);  // B: 8 (4) rows x (16 lanes x 4 bytes)
  }
  for (int t = 4; t < 8; ++t) set(t, kTileRows, 64);  // C: 16 rows x 16 int32
  __asm__ volatile("ldtilecfg %0" ::"m"(config));
  configured = inputs;
}

// 16 rows' 4 dwords each (16 bytes at rows[n] + offset) -> out[j] = lane n: dword j of row n.
void transpose_16x4(const uint8_t* const* rows, size_t offset, __m512i out[4]) {
  __m512i t[4];
  const __m512i within = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  for (int q = 0; q < 4; ++q) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[4 * q] + offset)));
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[4 * q + 1] + offset)), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[4 * q + 2] + offset)), 2);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[4 * q + 3] + offset)), 3);
    t[q] = _mm512_permutexvar_epi32(within, v);  // lanes 4j + i: row 4q + i, dword j
  }
  const __m512i u0 = _mm512_shuffle_i32x4(t[0], t[1], 0x44), u1 = _mm512_shuffle_i32x4(t[0], t[1], 0xEE);
  const __m512i u2 = _mm512_shuffle_i32x4(t[2], t[3], 0x44), u3 = _mm512_shuffle_i32x4(t[2], t[3], 0xEE);
  out[0] = _mm512_shuffle_i32x4(u0, u2, 0x88);
  out[1] = _mm512_shuffle_i32x4(u0, u2, 0xDD);
  out[2] = _mm512_shuffle_i32x4(u1, u3, 0x88);
  out[3] = _mm512_shuffle_i32x4(u1, u3, 0xDD);
}

// The 16 fp16 values at rows[n] + offset -> out[n].
void gather_halves(const uint8_t* const* rows, size_t offset, uint8_t* out) {
  for (int n = 0; n < kPanelRows; ++n) std::memcpy(out + 2 * n, rows[n] + offset, 2);
}

__m512 load_halves(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
}

// Panel rows [r0, r0 + 16) of `weights`, every block, into the packed layout at `out`.
void pack_panel(const Layout& l, const uint8_t* weights, size_t row_bytes, int64_t r0, int64_t blocks, uint8_t* out) {
  const size_t stride = panel_packed_block_bytes(l), codes = panel_packed_codes_bytes(l);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const uint8_t* rows[kPanelRows];
  for (int64_t b = 0; b < blocks; ++b) {
    for (int n = 0; n < kPanelRows; ++n) rows[n] = weights + (r0 + n) * row_bytes + b * l.weight_block_bytes;
    uint8_t* block = out + b * stride;
    __m512i d[4];
    if (l.four_bit) {
      transpose_16x4(rows, l.weight_codes_offset, d);
      for (int j = 0; j < 4; ++j) _mm512_storeu_si512(block + 64 * j, d[j]);
      if (l.high_bits_offset >= 0) panel_high_bits(l, rows, block + 256);
    } else {
      // Signed bytes + 128 = unsigned codes.
      for (int half = 0; half < 2; ++half) {
        transpose_16x4(rows, l.weight_codes_offset + 16 * half, d);
        for (int j = 0; j < 4; ++j) _mm512_storeu_si512(block + 64 * (4 * half + j), _mm512_xor_si512(d[j], flip));
      }
    }
    gather_halves(rows, 0, block + codes);
    if (l.offset == 0) gather_halves(rows, 2, block + codes + 2 * kPanelRows);  // Q4_1's m
  }
}

// A nibble-packed block's codes as the bytes a B tile reads; with `high`, Q5's fifth bits
// (the plane after the nibbles: one mask register a code vector) added as 16s.
__attribute__((always_inline)) inline void nibbles_to_bytes(const uint8_t* packed, bool high, __m512i out[8]) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  for (int j = 0; j < 4; ++j) {
    const __m512i v = _mm512_loadu_si512(packed + 64 * j);
    out[j] = _mm512_and_si512(v, low);
    out[j + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
  }
  if (!high) return;
  const __m512i sixteen = _mm512_set1_epi8(16);
  for (int j = 0; j < 8; ++j) {
    uint64_t bits;
    std::memcpy(&bits, packed + 256 + 8 * j, 8);
    out[j] = _mm512_mask_add_epi8(out[j], _cvtu64_mask64(bits), out[j], sixteen);
  }
}

// Q6_K's packed block's codes as bytes: four code vectors (inputs 4j..4j+3) from two of
// nibbles, plus 16 and 32 where the planes of bits 4 and 5 say.
__attribute__((always_inline)) inline void six_bits_to_bytes(const uint8_t* packed, __m512i out[4]) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  for (int v = 0; v < 2; ++v) {
    const __m512i x = _mm512_loadu_si512(packed + 64 * v);
    out[v] = _mm512_and_si512(x, low);
    out[v + 2] = _mm512_and_si512(_mm512_srli_epi16(x, 4), low);
  }
  const __m512i sixteen = _mm512_set1_epi8(16), thirty_two = _mm512_set1_epi8(32);
  for (int j = 0; j < 4; ++j) {
    uint64_t bit4, bit5;
    std::memcpy(&bit4, packed + 128 + 8 * j, 8);
    std::memcpy(&bit5, packed + 160 + 8 * j, 8);
    out[j] = _mm512_mask_add_epi8(out[j], _cvtu64_mask64(bit4), out[j], sixteen);
    out[j] = _mm512_mask_add_epi8(out[j], _cvtu64_mask64(bit5), out[j], thirty_two);
  }
}

// A packed panel read in place (4-bit codes as nibbles).
PanelView packed_view(const Layout& l, const uint8_t* packed) {
  const size_t stride = panel_packed_block_bytes(l);
  return {packed, stride, packed + panel_packed_codes_bytes(l), stride};
}

// A packed panel as the tile loops read it: 4-bit (and Q6_K's) codes expanded into `bytes`
// (blocks x panel_code_bytes).
PanelView panel_view(const Layout& l, const uint8_t* packed, int64_t blocks, uint8_t* bytes) {
  const size_t stride = panel_packed_block_bytes(l), codes = panel_packed_codes_bytes(l);
  const size_t code_bytes = panel_code_bytes(l);
  if (!l.four_bit) return packed_view(l, packed);
  for (int64_t b = 0; b < blocks; ++b) {
    __m512i v[8];
    if (l.six_bit) {
      six_bits_to_bytes(packed + b * stride, v);
    } else {
      nibbles_to_bytes(packed + b * stride, l.high_bits_offset >= 0, v);
    }
    for (int j = 0; j < l.block_inputs / 4; ++j) _mm512_store_si512(bytes + b * code_bytes + 64 * j, v[j]);
  }
  return {bytes, code_bytes, packed + codes, stride};
}

// One block's exact integer dot products (16 lanes: the panel's rows) into a row's sums: the
// one sequence of float operations every path uses. terms: the row's block terms
// (panel_activation_terms): d_a, then o sum(a) (an integer below 2^24, so the subtraction in
// float is exact), or Q4_1's s_a, or the K-quants' d_a sum(a). wide: the scales and minimums
// are float32 (the K-quants), not fp16. six: Q6_K, whose minimum -32 d sc is the scale times
// -32 (exact), not stored.
__attribute__((always_inline)) inline __m512 accumulate(__m512 acc, __m512i dots, bool affine, bool wide, bool six,
                                                        const uint8_t* scales, const float* terms) {
  __m512 t = _mm512_cvtepi32_ps(dots);
  if (!affine) t = _mm512_sub_ps(t, _mm512_set1_ps(terms[1]));
  const __m512 d = wide ? _mm512_loadu_ps(scales) : load_halves(scales);
  acc = _mm512_fmadd_ps(t, _mm512_mul_ps(d, _mm512_set1_ps(terms[0])), acc);
  if (affine) {
    const __m512 m = six    ? _mm512_mul_ps(d, _mm512_set1_ps(-32.0f))
                     : wide ? _mm512_loadu_ps(scales + 4 * kPanelRows)
                            : load_halves(scales + 2 * kPanelRows);
    acc = _mm512_fmadd_ps(m, _mm512_set1_ps(terms[1]), acc);
  }
  return acc;
}

// A stored C tile (16 x 16 int32) into the 16 rows' sums; terms: the tile's for the block.
__attribute__((always_inline)) inline void fold(__m512 (&acc)[kTileRows], const int32_t* c, bool affine, bool wide,
                                                bool six, const uint8_t* scales, const float* terms) {
#pragma GCC unroll 16
  for (int m = 0; m < kTileRows; ++m) {
    acc[m] = accumulate(acc[m], _mm512_load_si512(c + m * kPanelRows), affine, wide, six, scales, terms + 2 * m);
  }
}

// The same, with the sums in memory (16 rows of 16 floats).
__attribute__((always_inline)) inline void fold_in_memory(float* acc, const int32_t* c, bool affine, bool wide,
                                                          bool six, const uint8_t* scales, const float* terms) {
#pragma GCC unroll 16
  for (int m = 0; m < kTileRows; ++m) {
    const __m512 sum = _mm512_load_ps(acc + m * kPanelRows);
    _mm512_store_ps(acc + m * kPanelRows,
                    accumulate(sum, _mm512_load_si512(c + m * kPanelRows), affine, wide, six, scales, terms + 2 * m));
  }
}

// 16 activation rows from `act` (rows `stride` apart) against a panel's codes as bytes, on tiles.
// Three stages a block, each on a different block: multiply block b (tile set b & 1), store the
// product of block b - 1 (the other set, whose multiply has had a whole fold to finish), fold
// block b - 2's stored product (its store an iteration old, so the vector loads do not wait on
// a tile store in flight). Folds go in block order: the same float sums as vnni_row's.
// terms: the tile's (panel_terms_index(blocks, m0, 0) onward).
// kSix (Q6_K's 16-input blocks) at compile time, as vnni_row_of's.
template <bool kSix>
void tile_rows_of(const Layout& l, const PanelView& panel, int64_t blocks, const uint8_t* act, size_t stride,
                  const float* terms, float* y, int64_t y_stride) {
  __m512 acc[kTileRows];
  for (int m = 0; m < kTileRows; ++m) acc[m] = _mm512_setzero_ps();
  alignas(64) int32_t c[3][kTileRows * kPanelRows];
  const bool affine = l.offset == 0;
  auto multiply = [&](int64_t b) {
    if ((b & 1) == 0) {
      _tile_loadd(0, act + act_of<kSix>(l, b), stride);
      _tile_loadd(2, panel.codes + b * panel.codes_stride, 64);
      _tile_zero(4);
      _tile_dpbsud(4, 0, 2);
    } else {
      _tile_loadd(1, act + act_of<kSix>(l, b), stride);
      _tile_loadd(3, panel.codes + b * panel.codes_stride, 64);
      _tile_zero(5);
      _tile_dpbsud(5, 1, 3);
    }
  };
  auto store = [&](int64_t b) {
    if ((b & 1) == 0) {
      _tile_stored(4, c[b % 3], 64);
    } else {
      _tile_stored(5, c[b % 3], 64);
    }
  };
  for (int64_t b = 0; b < blocks + 2; ++b) {
    if (b < blocks) multiply(b);
    if (b >= 1 && b <= blocks) store(b - 1);
    if (b >= 2) {
      fold(acc, c[(b - 2) % 3], affine, l.k_quant, kSix, panel.scales + (b - 2) * panel.scales_stride,
           terms + (b - 2) * 2 * kTileRows);
    }
  }
  for (int m = 0; m < kTileRows; ++m) _mm512_storeu_ps(y + m * y_stride, acc[m]);
}

// 32 activation rows (two tiles: `act`, `act` + 16 rows) against two panels: four products a
// block from two A and two B loads. The sums live in memory (64 rows of 16 floats, L1), as 64
// would not fit in registers; each product is folded while the next block's multiplies run.
// terms: the first tile's (the second's follow `blocks` blocks later).
// swiglu: the panels are a gate and an up panel, and y gets silu(gate) * up (16 columns).
template <bool kSix>
void tile_2x2_of(const Layout& l, const PanelView& panel0, const PanelView& panel1, int64_t blocks, const uint8_t* act,
                 size_t stride, const float* terms, float* y, int64_t y_stride, bool swiglu) {
  alignas(64) float acc[4][kTileRows * kPanelRows];  // [2 * panel + tile]
  std::memset(acc, 0, sizeof acc);
  alignas(64) int32_t c[2][4][kTileRows * kPanelRows];  // [block & 1][product]
  const bool affine = l.offset == 0;
  const uint8_t* act0 = act;
  const uint8_t* act1 = act + kTileRows * stride;
  const int64_t tile_terms = blocks * 2 * kTileRows;
  // Product q of block b - 1 into its sums.
  auto fold_previous = [&](int q, int64_t b) {
    const PanelView& panel = q < 2 ? panel0 : panel1;
    const uint8_t* scales = panel.scales + (b - 1) * panel.scales_stride;
    fold_in_memory(acc[q], c[(b - 1) & 1][q], affine, l.k_quant, kSix, scales,
                   terms + (q & 1) * tile_terms + (b - 1) * 2 * kTileRows);
  };
  for (int64_t b = 0; b <= blocks; ++b) {
    // Tile numbers are immediates in these instructions, hence the four spelled-out products.
    const bool more = b < blocks;
    const bool folds = b > 0;
    auto& cur = c[b & 1];
    if (more) {
      _tile_loadd(2, panel0.codes + b * panel0.codes_stride, 64);
      _tile_loadd(0, act0 + act_of<kSix>(l, b), stride);
      _tile_zero(4);
    }
    if (folds) fold_previous(0, b);
    if (more) {
      _tile_dpbsud(4, 0, 2);
      _tile_stored(4, cur[0], 64);
      _tile_loadd(1, act1 + act_of<kSix>(l, b), stride);
      _tile_zero(5);
    }
    if (folds) fold_previous(1, b);
    if (more) {
      _tile_dpbsud(5, 1, 2);
      _tile_stored(5, cur[1], 64);
      _tile_loadd(3, panel1.codes + b * panel1.codes_stride, 64);
      _tile_zero(6);
    }
    if (folds) fold_previous(2, b);
    if (more) {
      _tile_dpbsud(6, 0, 3);
      _tile_stored(6, cur[2], 64);
      _tile_zero(7);
    }
    if (folds) fold_previous(3, b);
    if (more) {
      _tile_dpbsud(7, 1, 3);
      _tile_stored(7, cur[3], 64);
    }
  }
  if (swiglu) {
    for (int q = 0; q < 2; ++q) {
      float* out = y + q * kTileRows * y_stride;
      for (int m = 0; m < kTileRows; ++m) {
        _mm512_storeu_ps(out + m * y_stride, silu_mul_avx512(_mm512_load_ps(acc[q] + m * kPanelRows),
                                                             _mm512_load_ps(acc[q + 2] + m * kPanelRows)));
      }
    }
    return;
  }
  for (int q = 0; q < 4; ++q) {
    float* out = y + (q & 1) * kTileRows * y_stride + (q >> 1) * kPanelRows;
    for (int m = 0; m < kTileRows; ++m) _mm512_storeu_ps(out + m * y_stride, _mm512_load_ps(acc[q] + m * kPanelRows));
  }
}

void tile_rows(const Layout& l, const PanelView& panel, int64_t blocks, const uint8_t* act, size_t stride,
               const float* terms, float* y, int64_t y_stride) {
  if (l.six_bit) {
    tile_rows_of<true>(l, panel, blocks, act, stride, terms, y, y_stride);
  } else {
    tile_rows_of<false>(l, panel, blocks, act, stride, terms, y, y_stride);
  }
}

void tile_2x2(const Layout& l, const PanelView& panel0, const PanelView& panel1, int64_t blocks, const uint8_t* act,
              size_t stride, const float* terms, float* y, int64_t y_stride, bool swiglu) {
  if (l.six_bit) {
    tile_2x2_of<true>(l, panel0, panel1, blocks, act, stride, terms, y, y_stride, swiglu);
  } else {
    tile_2x2_of<false>(l, panel0, panel1, blocks, act, stride, terms, y, y_stride, swiglu);
  }
}

// One activation row against a panel, on VNNI: the same integers, the same folds. The codes
// are bytes (Q8_0, or 4-bit panels expanded for a call of several rows) or, with nibbles, a
// 4-bit panel read in place (decode: the one pass over the weights). terms: the row's block 0
// terms (the next block's are a tile's 32 floats on).
// kSix: Q6_K's 16-input blocks (four code vectors), else 32 inputs (eight): a compile-time
// count keeps the codes in registers (a run-time one cost the 32-input types' decode ~10%).
template <bool kSix>
void vnni_row_of(const Layout& l, const PanelView& panel, bool nibbles, int64_t blocks, const uint8_t* act,
                 const float* terms, float* y) {
  constexpr int kVectors = kSix ? 4 : 8;
  __m512 acc = _mm512_setzero_ps();
  const bool affine = l.offset == 0;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block = panel.codes + b * panel.codes_stride;
    // Decode streams the panels from memory: ask for the block kPrefetchBlocks on now (the
    // hardware streamer stops at every 4 KiB page), into L2, whose queue holds more requests in
    // flight than L1's fill buffers (into L1, 6 blocks ahead, tg128 was 10% slower). Past the
    // panel's end it is the next one's start, or nothing: a prefetch never faults.
    if (nibbles || !l.four_bit) {
      for (size_t line = 0; line <= panel.codes_stride; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(block + kPrefetchBlocks * panel.codes_stride + line), _MM_HINT_T1);
      }
    }
    const uint8_t* a = act + act_of<kSix>(l, b);
    __m512i codes[8];
    if (nibbles && kSix) {
      six_bits_to_bytes(block, codes);
    } else if (nibbles) {
      nibbles_to_bytes(block, l.high_bits_offset >= 0, codes);
    } else {
      for (int j = 0; j < kVectors; ++j) codes[j] = _mm512_loadu_si512(block + 64 * j);
    }
    // Four independent chains (vpdpbusd's latency, not its throughput, bounds one chain); the
    // integer sums are exact whatever the grouping.
    __m512i part[4];
    for (int j = 0; j < 4; ++j) {
      int32_t lo;
      std::memcpy(&lo, a + 4 * j, 4);
      part[j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), codes[j], _mm512_set1_epi32(lo));
      if constexpr (!kSix) {
        int32_t hi;
        std::memcpy(&hi, a + 4 * (j + 4), 4);
        part[j] = _mm512_dpbusd_epi32(part[j], codes[j + 4], _mm512_set1_epi32(hi));
      }
    }
    const __m512i dots = _mm512_add_epi32(_mm512_add_epi32(part[0], part[1]), _mm512_add_epi32(part[2], part[3]));
    acc = accumulate(acc, dots, affine, l.k_quant, kSix, panel.scales + b * panel.scales_stride,
                     terms + b * 2 * kTileRows);
  }
  _mm512_storeu_ps(y, acc);
}

void vnni_row(const Layout& l, const PanelView& panel, bool nibbles, int64_t blocks, const uint8_t* act,
              const float* terms, float* y) {
  if (l.six_bit) {
    vnni_row_of<true>(l, panel, nibbles, blocks, act, terms, y);
  } else {
    vnni_row_of<false>(l, panel, nibbles, blocks, act, terms, y);
  }
}

// How a call reads a panel: expanded to bytes when several rows will (tiles from 16 rows,
// VNNI rows from 4: the expansion costs about one row's nibble unpacking), else in place.
bool expand_codes(const Layout& l, bool tiles, int64_t n) {
  return l.four_bit && n >= (tiles ? kTileRows : 4);
}

}  // namespace

void amx_pack_panels(DType weight_type, int64_t cols, const uint8_t* weights, int64_t panel_begin, int64_t panel_end,
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

void amx_panel_gemm(DType weight_type, int64_t cols, const uint8_t* weights, const uint8_t* packed, const uint8_t* acts,
                    size_t act_row_bytes, const float* terms, int64_t n, int64_t panel_begin, int64_t panel_end,
                    float* y, int64_t y_stride, bool use_tiles) {
  const Layout l = panel_layout_of(weight_type);
  const int64_t blocks = cols / l.block_inputs;
  const size_t row_bytes = static_cast<size_t>(blocks) * l.weight_block_bytes;
  const size_t panel_bytes = static_cast<size_t>(blocks) * panel_packed_block_bytes(l);
  const size_t bytes_per_panel = static_cast<size_t>(blocks) * panel_code_bytes(l);
  // Scratch: two panels' codes as bytes (4-bit types read by several rows), then two packed
  // panels (when the matrix was not packed beforehand).
  const bool tiles = use_tiles && n >= kTileRows;
  const bool expand = expand_codes(l, use_tiles, n);
  uint8_t* scratch = panel_scratch(2 * bytes_per_panel + (packed == nullptr ? 2 * panel_bytes : 0));
  if (tiles) configure_tiles(l.block_inputs);
  for (int64_t p = panel_begin; p < panel_end;) {
    // Two panels at a time where there are two (the 2 x 2 tiles), else one.
    const int64_t count = tiles && n >= 2 * kTileRows && p + 1 < panel_end ? 2 : 1;
    const uint8_t* panel[2];
    PanelView view[2];
    for (int64_t i = 0; i < count; ++i) {
      if (packed != nullptr) {
        panel[i] = packed + static_cast<size_t>(p + i) * panel_bytes;
      } else {
        uint8_t* own = scratch + 2 * bytes_per_panel + i * panel_bytes;
        if (l.k_quant) {
          panel_pack_k_quant(l, cols, weights, (p + i) * kPanelRows, own);
        } else {
          pack_panel(l, weights, row_bytes, (p + i) * kPanelRows, blocks, own);
        }
        panel[i] = own;
      }
      view[i] = expand ? panel_view(l, panel[i], blocks, scratch + i * bytes_per_panel) : packed_view(l, panel[i]);
    }
    const int64_t r0 = p * kPanelRows;
    int64_t m = 0;
    if (count == 2) {
      for (; m + 2 * kTileRows <= n; m += 2 * kTileRows) {
        tile_2x2(l, view[0], view[1], blocks, acts + m * act_row_bytes, act_row_bytes,
                 terms + panel_terms_index(blocks, m, 0), y + m * y_stride + r0, y_stride, false);
      }
    }
    for (int64_t i = 0; i < count; ++i) {
      float* out = y + r0 + i * kPanelRows;
      int64_t row = m;
      for (; tiles && row + kTileRows <= n; row += kTileRows) {
        tile_rows(l, view[i], blocks, acts + row * act_row_bytes, act_row_bytes,
                  terms + panel_terms_index(blocks, row, 0), out + row * y_stride, y_stride);
      }
      for (; row < n; ++row) {
        vnni_row(l, view[i], l.four_bit && !expand, blocks, acts + row * act_row_bytes,
                 terms + panel_terms_index(blocks, row, 0), out + row * y_stride);
      }
    }
    p += count;
  }
}

void amx_panel_gemm_swiglu(DType weight_type, int64_t cols, const uint8_t* gate, const uint8_t* up, const uint8_t* acts,
                           size_t act_row_bytes, const float* terms, int64_t n, int64_t panel_begin, int64_t panel_end,
                           float* out, int64_t out_stride, bool use_tiles) {
  const Layout l = panel_layout_of(weight_type);
  const int64_t blocks = cols / l.block_inputs;
  const size_t panel_bytes = static_cast<size_t>(blocks) * panel_packed_block_bytes(l);
  const size_t bytes_per_panel = static_cast<size_t>(blocks) * panel_code_bytes(l);
  const bool tiles = use_tiles && n >= kTileRows;
  const bool expand = expand_codes(l, use_tiles, n);
  uint8_t* scratch = panel_scratch(2 * bytes_per_panel);
  if (tiles) configure_tiles(l.block_inputs);
  alignas(64) float gate_rows[kTileRows * kPanelRows], up_rows[kTileRows * kPanelRows];
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    const uint8_t* panel[2] = {gate + static_cast<size_t>(p) * panel_bytes, up + static_cast<size_t>(p) * panel_bytes};
    PanelView view[2];
    for (int i = 0; i < 2; ++i) {
      view[i] = expand ? panel_view(l, panel[i], blocks, scratch + i * bytes_per_panel) : packed_view(l, panel[i]);
    }
    float* y = out + p * kPanelRows;
    int64_t m = 0;
    for (; tiles && m + 2 * kTileRows <= n; m += 2 * kTileRows) {
      tile_2x2(l, view[0], view[1], blocks, acts + m * act_row_bytes, act_row_bytes,
               terms + panel_terms_index(blocks, m, 0), y + m * out_stride, out_stride, true);
    }
    // What is left: gate and up apart into 16 x 16 scratch, then the same epilogue.
    for (; tiles && m + kTileRows <= n; m += kTileRows) {
      const float* t = terms + panel_terms_index(blocks, m, 0);
      tile_rows(l, view[0], blocks, acts + m * act_row_bytes, act_row_bytes, t, gate_rows, kPanelRows);
      tile_rows(l, view[1], blocks, acts + m * act_row_bytes, act_row_bytes, t, up_rows, kPanelRows);
      for (int r = 0; r < kTileRows; ++r) {
        _mm512_storeu_ps(y + (m + r) * out_stride, silu_mul_avx512(_mm512_load_ps(gate_rows + r * kPanelRows),
                                                                   _mm512_load_ps(up_rows + r * kPanelRows)));
      }
    }
    for (; m < n; ++m) {
      const float* t = terms + panel_terms_index(blocks, m, 0);
      vnni_row(l, view[0], l.four_bit && !expand, blocks, acts + m * act_row_bytes, t, gate_rows);
      vnni_row(l, view[1], l.four_bit && !expand, blocks, acts + m * act_row_bytes, t, up_rows);
      _mm512_storeu_ps(y + m * out_stride, silu_mul_avx512(_mm512_load_ps(gate_rows), _mm512_load_ps(up_rows)));
    }
  }
}

}  // namespace folio::cpu
