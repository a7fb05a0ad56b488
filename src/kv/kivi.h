// KIVI (Liu et al., ICML 2024) inside the paged cache's blocks: the arithmetic of kivi4 and
// kivi2 (kv_format.h has the byte layout), the CPU's code and the definition a GPU kernel
// must match byte for byte. A group of 32 values (a key channel over 32 tokens, or 32 channels
// of a value row) is stored asymmetrically:
//   lo = min x_i, hi = max x_i, L = 2^bits - 1
//   s  = fp16(float(hi - lo) / L),  m = fp16(lo)           (round to nearest even)
//   q_i = s > 0 ? clamp(rint((x_i - m) / s), 0, L) : 0    (IEEE single precision, no fused ops)
//   x'_i = q_i * s + m
// The inputs are the staged fp16 values, so lo is exact in fp16 and every group's error is at
// most s / 2 plus s's own rounding (L * |s - (hi - lo) / L|, below 2^-11 of the range).
#pragma once

#include <cstdint>

#include "kv/kv_layer_view.h"

namespace folio {

// Quantizes n values x[0], x[stride], ... into codes (one per byte, 0..L) and the group's scale
// and minimum as fp16 bits.
void kivi_quantize_group(int32_t bits, const float* x, int32_t n, int32_t stride, uint8_t* codes, uint16_t* scale,
                         uint16_t* minimum);

// Quantizes staging block `staging` (K and V, every head) into block `block`'s bytes: the seal
// of a block that has filled. The staging block is left as it was.
void kivi_seal_block(const KvLayerView& cache, int32_t block, int32_t staging);

// A sealed block's keys of one head, dequantized and transposed: k_t[d * block_size + s].
void kivi_load_keys_transposed(const KvLayerView& cache, int32_t block, int32_t head, float* k_t);
// One token's key (head_dim floats) of a sealed block.
void kivi_load_key_row(const KvLayerView& cache, int32_t block, int32_t in_block, int32_t head, float* out);
// One token's value (head_dim floats) of a sealed block.
void kivi_load_value_row(const KvLayerView& cache, int32_t block, int32_t in_block, int32_t head, float* out);

}  // namespace folio
