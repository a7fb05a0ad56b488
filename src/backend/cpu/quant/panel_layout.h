// What every panel path (panel_gemm_amx.cpp, panel_gemm_avx2.cpp) agrees on, as plain functions
// compiled without SIMD flags (panel_gemm.cpp), so the files built with -m flags share no inline
// code (quant/README.md): a weight type's block and activation layout, the packed block's size,
// where a row's activation terms are, and the thread's scratch for panels.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace folio::cpu {

inline constexpr int kPanelWeightRows = 16;  // weight rows per panel (the tiles' N)
inline constexpr int kPanelTermRows = 16;    // the terms' layout groups activation rows by 16 (AMX's M)
inline constexpr int kPanelBlock = 32;       // inputs per block (the tiles' K)

struct PanelLayout {
  size_t weight_block_bytes;  // GGUF block
  size_t weight_codes_offset;
  size_t act_block_bytes;  // activation block (Q8_0: d, q[32]; Q8_1: d, s, q[32])
  size_t act_codes_offset;
  int offset;            // subtracted from the packed unsigned codes (0: affine, Q4_1 and Q5_1)
  bool four_bit;         // packed as nibbles (Q4_0, Q4_1, Q5_0, Q5_1); Q8_0's as bytes
  int high_bits_offset;  // Q5_0 / Q5_1: where the block's 32 fifth bits are (qh); Q5_K: 0; -1 others
  // Q4_K / Q5_K: 256-input super-blocks whose 32-input sub-blocks are the panel's blocks, each
  // with its exact scale d * sc and minimum -dmin * m as float32 (fp16 would round them); the
  // activations are Q8_0 (per 32 inputs), not the Q8_K of the K-quants' dot kernels.
  bool k_quant;
  // Inputs per panel block: 32, or 16 for Q6_K, whose 16-input sub-blocks each have their own
  // scale (two panel blocks read one Q8_0 activation block, each its half).
  int block_inputs = kPanelBlock;
  // Q6_K: codes 0..63 (q + 32) as nibbles with two planes of bits beside them (bits 4 and 5, as
  // Q5's fifth), the float32 scale d * sc per row, and the minimum -32 d sc computed, not stored.
  bool six_bit = false;
};

// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K or Q6_K (panel_gemm_supports' types). For Q4_K and
// Q5_K, weight_block_bytes is an eighth of a super-block (its bytes per 32 inputs); Q6_K: 0.
PanelLayout panel_layout_of(DType type);
// A Q4_K / Q5_K / Q6_K panel (rows [r0, r0 + 16) of the matrix at `weights`) into the packed
// layout at `panel`, in plain C++ (load time): the same bytes on every ISA.
void panel_pack_k_quant(const PanelLayout& l, int64_t cols, const uint8_t* weights, int64_t r0, uint8_t* panel);
// Q5_0 / Q5_1: a packed block's plane of fifth bits, beside its nibbles. Word j (8 bytes) has
// bit 4n + i set when input 4j + i of the panel's row n has its fifth bit: the bits of code
// vector j's 64 bytes, in order. rows[n]: row n's stored block.
void panel_high_bits(const PanelLayout& l, const uint8_t* const* rows, uint8_t out[64]);
// A packed block: its codes (256 bytes of nibbles and Q5's 64 bytes of fifth bits, or 512
// bytes; Q6_K's 16-input block: 128 bytes of nibbles and 2 x 32 bytes of planes), then the 16
// rows' scales (and minimums): fp16, or float32 for the K-quants.
size_t panel_packed_codes_bytes(const PanelLayout& l);
size_t panel_packed_block_bytes(const PanelLayout& l);
// A block's codes as bytes (what a B tile reads): 16 rows x its inputs.
size_t panel_code_bytes(const PanelLayout& l);
// Where row m's block b terms are: tiles of 16 rows, block by block, so that a tile's terms for
// one block are 128 contiguous bytes (row m's next block is 2 x 16 floats on).
size_t panel_terms_index(int64_t blocks, int64_t m, int64_t b);
// The calling thread's scratch of at least `bytes` (64-byte aligned), grown on demand and freed
// when the thread ends.
uint8_t* panel_scratch(size_t bytes);

}  // namespace folio::cpu
