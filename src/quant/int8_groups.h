// The GPU's 8-bit weight layout (W8A16): the GGUF types of 5 to 8 bits (Q8_0, Q5_0, Q5_1,
// Q5_K, Q6_K) repacked at load into one layout that folio's CUDA kernels read, so that a Q8_0
// file, or a Q4_K_M file's Q6_K and Q5_0 matrices, stay quantized on the device instead of
// doubling to BF16. 4-bit types repack into it too: a matrix whose parts mix Q4_K and Q6_K (a
// Q4_K_M file's Q|K|V) is one 8-bit matrix. A weight is w = scale * q + min with q in 0..255
// and one (scale, min) pair per row and group of 16 or 32 consecutive columns (the matrix's
// group: 16 where a part is Q6_K, whose sub-blocks are 16 wide; 32 otherwise): Q8_0 is scale d,
// min -128d (q = the stored int8 + 128); Q5_0 d and -16d; Q5_1 d and m; Q5_K d * sc and
// -dmin * m; Q6_K d * sc and -32 d * sc (q = the stored 6-bit value).
//
// Codes: a row's cols bytes, column c in byte c. Groups: (rows, cols / group) 32-bit words,
// the scale's BF16 bits low and the min's high (as quant/int4_groups.h). The kernels compute
// the weight as bf16(fmaf(q, scale, min)) in FP32 (an 8-bit code does not fit BF16's
// subtraction trick that the 4-bit kernels use); dequantize_int8_row is that, bit for bit.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace folio::quant {

// Whether a tensor of this type repacks into the layout.
bool int8_repackable(DType type);

// The widest group the type's scales allow: 16 for Q6_K, 32 for the others.
int64_t int8_group_cols(DType type);

// One row of `cols` elements (a multiple of the type's block size) into codes (cols bytes) and
// groups (cols / group_cols words); group_cols is 16 or 32 and at most int8_group_cols(type).
void repack_int8_row(DType type, const void* src, int64_t cols, int64_t group_cols, uint8_t* codes, uint32_t* groups);

// Packs 8-bit values q and per-group scale and min (cols / group_cols each) into the layout.
void pack_int8_row(const uint8_t* q, const float* scales, const float* mins, int64_t cols, int64_t group_cols,
                   uint8_t* codes, uint32_t* groups);

// The weights the kernels compute with, as floats (each exactly a BF16 value).
void dequantize_int8_row(const uint8_t* codes, const uint32_t* groups, int64_t cols, int64_t group_cols, float* out);

}  // namespace folio::quant
