// W4A16 products: y = x w^T + beta y with w in the 4-bit grouped layout (quant/int4_groups.h:
// codes, and a BF16 (scale, min) per row and 2^group_shift columns: 32, or a checkpoint's wider
// groups) and x in BF16, FP32 accumulation.
//
// int4_small_gemm (n <= kInt4SmallGemmMaxRows tokens, decode): grouped_small_gemm.cuh's kernel
// (shared with the 8-bit layout, int8_gemm.h): the weights stream from memory once, are
// dequantized in registers (a mask, a subtraction and one BF16 fma per pair of weights) and
// multiplied on the BF16 tensor cores, the weight rows as the MMA's M and the tokens as its N.
//
// dequantize_int4 (n > 64): the whole matrix to BF16 in a scratch buffer, for cuBLASLt's BF16
// GEMM; both paths compute with the same BF16 weight values. On Hopper, where it is faster,
// grouped_wgmma_gemm.h dequantizes in its main loop instead (GemmPolicy). (An mma.sync tiled
// variant was measured and removed: docs/BENCHMARKS.md, issue 13.)
#pragma once

#include <cstdint>

struct CUstream_st;

namespace folio::cuda {

constexpr int64_t kInt4SmallGemmMaxRows = 64;
// Act-order weights up to this many tokens read their inputs through the order in the small
// GEMM itself (int4_small_gemm's and int8_small_gemm's input_order); beyond, a gather first.
constexpr int64_t kSmallGemmOrderedMaxRows = 8;

// 1 <= n <= kInt4SmallGemmMaxRows, m % 16 == 0, k % 64 == 0, x 16-byte aligned.
bool int4_small_gemm_supports(const void* x, int64_t n, int64_t m, int64_t k);

// x: (n, k) bf16; codes: (m, k / 2) bytes; groups: (m, k >> group_shift) words (group_shift >= 5,
// k a multiple of its groups); y: (n, m) fp32.
// input_order (act-order, n <= kSmallGemmOrderedMaxRows): stored column c multiplies x's
// column input_order[c], read in place (no gather first). wide (where k % 128 == 0): each
// thread loads 16 bytes of a row at a time (32 columns) instead of 8 (GemmPolicy::int4_small_gemm_wide).
// programmatic (sm_90+): launched as a programmatic dependent of the kernel ahead, prefetching
// its weights while that one finishes (programmatic_launch.cuh, GemmPolicy::programmatic_launch).
// streamed (with wide): where int4_small_gemm_streams says so (Hopper, n <= 8, the matrix at least
// one 16-row group an SM), grouped_streamed_gemm.cuh's kernel: one block an SM fed by bulk copies
// (GemmPolicy::small_gemm_streamed).
void int4_small_gemm(const void* x, const uint8_t* codes, const uint32_t* groups, int group_shift, float* y, int64_t n,
                     int64_t m, int64_t k, float beta, CUstream_st* stream, const int32_t* input_order = nullptr,
                     bool wide = false, bool programmatic = false, bool streamed = false);

// Whether int4_small_gemm with wide and streamed on takes the streamed kernel for this product.
bool int4_small_gemm_streams(int64_t n, int64_t m, int64_t k, int group_shift, const uint8_t* codes,
                             const uint32_t* groups);

// out: (m, k) bf16, the weights the small GEMM computes with.
void dequantize_int4(const uint8_t* codes, const uint32_t* groups, int group_shift, int64_t m, int64_t k, uint16_t* out,
                     CUstream_st* stream);

}  // namespace folio::cuda
