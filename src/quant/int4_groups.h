// The GPU's 4-bit weight layout (W4A16): every 4-bit GGUF type (Q4_0, Q4_1, Q4_K; a Q4_K_M
// file's Q4_K tensors) repacked at load into one layout that folio's CUDA kernels read, so one
// kernel serves every 4-bit source. A weight is w = scale * q + min with q in 0..15 and one
// (scale, min) pair per row and group of 32 consecutive columns: Q4_0 is scale d, min -8d; Q4_1
// d and m; Q4_K d * sc and -dmin * m of each 32-element sub-block.
//
// Codes: a row's cols / 2 bytes, one 32-bit little-endian word per 8 consecutive columns c..c+7,
// column c + 2j in bits 4j..4j+3 and column c + 2j + 1 in bits 16 + 4j..16 + 4j + 3 (j = 0..3).
// Masking a word with 0x000f000f after a shift of 4j then gives the pair (c + 2j, c + 2j + 1) in
// the two halves of a register: two BF16 lanes in one instruction (int4_gemm.cu).
// Groups: (rows, cols / G) 32-bit words, the scale's BF16 bits low and the min's high, G = 32
// (every 4-bit GGUF type) or any larger power of two dividing cols when every 32-column block of
// a group has the same pair: an AWQ / GPTQ checkpoint of group size 128 (WeightTensor::
// group_cols) then stores a quarter of the words, 0.031 bytes a weight instead of 0.125 (about
// 12% of a 4-bit decode step's traffic). The kernels dequantize with one BF16 fused
// multiply-add, so the weight they compute with is bf16(scale * q + min) with scale and min
// rounded to BF16 (dequantize_int4_row is that, bit for bit); against the file's own value that
// is the same order of error as the BF16 upload's.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace folio::quant {

constexpr int64_t kInt4Group = 32;

// Whether a tensor of this type repacks into the layout (Q4_0, Q4_1, Q4_K).
bool int4_repackable(DType type);

// One row of `cols` elements of a repackable type into codes (cols / 2 bytes) and groups
// (cols / group_cols words; group_cols a power of two >= 32 dividing cols). cols must be a
// multiple of the type's block size. False (the row only partly written) when two 32-column
// blocks of one group differ in their BF16 (scale, min): the row does not have that group size.
bool repack_int4_row(DType type, const void* src, int64_t cols, uint8_t* codes, uint32_t* groups,
                     int64_t group_cols = kInt4Group);

// Packs 4-bit values q (cols of them, 0..15) and each 32-column block's scale and min (cols / 32
// each) into the layout with group_cols columns a word: the inverse of what the kernels read;
// repack_int4_row and other 4-bit sources end here. False as repack_int4_row's.
bool pack_int4_row(const uint8_t* q, const float* scales, const float* mins, int64_t cols, uint8_t* codes,
                   uint32_t* groups, int64_t group_cols = kInt4Group);

// The weights the kernels compute with, as floats (each exactly a BF16 value).
void dequantize_int4_row(const uint8_t* codes, const uint32_t* groups, int64_t cols, float* out,
                         int64_t group_cols = kInt4Group);

}  // namespace folio::quant
