// The block formats folio stores numbers in, apart from any device: which GGUF types are weight
// formats, each one's activation partner, and the scalar reference conversions (bit-exact GGUF
// formulas). The model loader, the CPU kernels, the CUDA weight upload, `folio synth` and the
// tests all use these; the fast per-ISA kernels live in backend/cpu/quant/.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace folio::quant {

using DequantizeRowFn = void (*)(const void* src, float* dst, int64_t n);
using QuantizeRowFn = void (*)(const float* src, void* dst, int64_t n);

// The types folio computes with as weights: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
// Q5_K, Q6_K.
bool is_weight_format(DType type);

// What activations are converted to before dot products with a weight of this format: Q8_0 for
// Q4_0 / Q5_0 / Q8_0, Q8_1 for Q4_1 / Q5_1, Q8_K for the K-quants, F32 for the float types.
DType activation_format(DType weight_type);

// The scalar dequantizer of a weight or activation format (Q8_1 and Q8_K included), or null.
// n is a multiple of the type's block size.
DequantizeRowFn dequantizer(DType type);

// The scalar converter of float activations into an activation format (F32, Q8_0, Q8_1, Q8_K):
// d = max|x| / 127, q = round-half-to-even(x / d), as the SIMD paths do; null for other types.
QuantizeRowFn activation_quantizer(DType activation_type);

// dequantizer(type) applied, false when there is none.
bool dequantize_row(DType type, const void* src, float* dst, int64_t n);

// Reference quantizer float -> type (round to nearest, as GGUF's reference quantizers do; the
// K-quants with a plain min/max per sub-block); used by tests to make random blocks and by
// `folio synth`. The activation formats Q8_1 and Q8_K go through activation_quantizer. False for
// unsupported types. n must be a multiple of the type's block size.
bool quantize_row_reference(DType type, const float* src, void* dst, int64_t n);

}  // namespace folio::quant
