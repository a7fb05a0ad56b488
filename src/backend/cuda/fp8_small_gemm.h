// y = (x8 w8^T) * w_scale[row] * x_scale[token] + beta y for a few tokens (4 <= n <= 64, decode
// at moderate batch): FP8 weights and FP8 activations (both E4M3, a scale per weight row and per
// token, as fp8_rows.h makes them) on the FP8 tensor cores with mma.sync m16n8k32 (sm_89+).
//
// Between the GEMV (compute-bound from n ~ 4: it widens every weight to fp32 on CUDA cores) and
// cuBLASLt's FP8 GEMM (one outer-vector-scaled algorithm, slower than BF16 for the narrow
// Llama-3-8B shapes up to n ~ 48; docs/BENCHMARKS.md, issue 13), this streams the weights like
// the GEMV and multiplies on tensor cores. The weight rows are the MMA's M (16 a warp) and the
// tokens its N (8 a tile). Both operands are read straight into registers with no shared-memory
// staging: a dot product's order over k is free, so each thread's fragment slots are assigned
// the 16 contiguous bytes it loads from its weight row and its token row. A block's 8 warps split
// k and reduce through shared memory.
#pragma once

#include <cstdint>

struct CUstream_st;

namespace folio::cuda {

constexpr int64_t kFp8SmallGemmMaxRows = 64;

// Whether fp8_small_gemm supports the call: 1 <= n <= kFp8SmallGemmMaxRows, m % 16 == 0,
// k % 64 == 0, every pointer 16-byte aligned.
bool fp8_small_gemm_supports(const void* x8, const void* w8, int64_t n, int64_t m, int64_t k);

// x8: (n, k) E4M3, x_scales: (n,); w8: (m, k) E4M3, w_scales: (m,); y: (n, m) fp32. beta 0: y is
// only written.
void fp8_small_gemm(const uint8_t* x8, const float* x_scales, const uint8_t* w8, const float* w_scales, float* y,
                    int64_t n, int64_t m, int64_t k, float beta, CUstream_st* stream);

}  // namespace folio::cuda
