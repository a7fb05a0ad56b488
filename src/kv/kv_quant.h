// Quantizing K/V rows into the cache formats of kv_format.h, and back: the CPU's code and the
// definition the CUDA kernels must match byte for byte. A row is one token of one head
// (head_dim values). The arithmetic is IEEE single precision with round-to-nearest-even at
// every step and no fused operations, so any conforming device computes the same bytes:
//   amax  = max |x_i|
//   scale = amax / M,  inv = M / amax    (M = 448 for E4M3, 127 for int8; both 0 when amax is 0)
//   q_i   = E4M3(x_i * inv) saturating, or clamp(rint(x_i * inv), -127, 127)
//   x'_i  = value(q_i) * scale
#pragma once

#include <cstdint>

#include "core/fp8.h"  // fp8_e4m3_from_float / _to_float / _values
#include "kv/kv_layer_view.h"

namespace folio {

// One row of n floats -> n bytes and a scale (quantized formats only).
void kv_quantize_row(KvFormat format, const float* x, int32_t n, uint8_t* values, float* scale);
// The dequantized row: value(q_i) * scale.
void kv_dequantize_row(KvFormat format, const uint8_t* values, float scale, int32_t n, float* out);

// Stores one row (slot, head) of K (which = 0) or V (which = 1) in the view's format.
void kv_store_row(const KvLayerView& cache, int which, int64_t slot, int32_t head, const float* x);
// Quantizes staging block `staging` (K and V, every head) into block `block`'s bytes, in the
// view's residual format (kv_format_has_residual): KIVI's groups (kivi_seal_block) or fp8's
// rows, each row as kv_store_row stores it. The staging block is left as it was.
void kv_seal_block(const KvLayerView& cache, int32_t block, int32_t staging);
// Reads one row back as floats (what attention computes with); for KIVI, from a sealed block.
void kv_load_row(const KvLayerView& cache, int which, int64_t slot, int32_t head, float* out);

}  // namespace folio
