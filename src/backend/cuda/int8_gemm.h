// W8A16 products: y = x w^T + beta y with w in the 8-bit grouped layout (quant/int8_groups.h:
// a byte per weight, and a BF16 (scale, min) per row and 16 or 32 columns) and x in BF16, FP32
// accumulation: the 5- to 8-bit GGUF types (Q8_0, Q5_0, Q5_1, Q5_K, Q6_K) kept quantized.
//
// int8_small_gemm (n <= kInt8SmallGemmMaxRows tokens, decode): grouped_small_gemm.cuh's kernel,
// the weights streamed once and dequantized in registers (in FP32: a byte permute, a
// subtraction, a fused multiply-add and half a conversion per weight).
// dequantize_int8 (larger n): the whole matrix to BF16 in a scratch buffer, for cuBLASLt's BF16
// GEMM; both paths compute with the same BF16 weight values.
#pragma once

#include <cstdint>

struct CUstream_st;

namespace folio::cuda {

constexpr int64_t kInt8SmallGemmMaxRows = 64;

// 1 <= n <= kInt8SmallGemmMaxRows, m % 16 == 0, k % 64 == 0, x 16-byte aligned.
bool int8_small_gemm_supports(const void* x, int64_t n, int64_t m, int64_t k);

// x: (n, k) bf16; codes: (m, k) bytes; groups: (m, k >> group_shift) words (group_shift 4 or
// 5: 16 or 32 columns); y: (n, m) fp32. input_order (act-order, n <= kSmallGemmOrderedMaxRows):
// stored column c multiplies x's column input_order[c], read in place (no gather first).
// programmatic, streamed: as int4_small_gemm's.
void int8_small_gemm(const void* x, const uint8_t* codes, const uint32_t* groups, int group_shift, float* y, int64_t n,
                     int64_t m, int64_t k, float beta, CUstream_st* stream, const int32_t* input_order = nullptr,
                     bool programmatic = false, bool streamed = false);

// Whether int8_small_gemm with streamed on takes the streamed kernel for this product.
bool int8_small_gemm_streams(int64_t n, int64_t m, int64_t k, int group_shift, const uint8_t* codes,
                             const uint32_t* groups);

// out: (m, k) bf16, the weights the small GEMM computes with. k % 16 == 0.
void dequantize_int8(const uint8_t* codes, const uint32_t* groups, int group_shift, int64_t m, int64_t k, uint16_t* out,
                     CUstream_st* stream);

}  // namespace folio::cuda
