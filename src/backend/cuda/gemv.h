// y = x W^T + beta y (W bf16 or FP8) for a handful of rows (decode at batch <= 8), as a weight-streaming GEMV:
// one warp per output feature reads that weight row once with 16-byte loads and keeps one
// accumulator per input row. At n = 1 a GEMM's tiles leave most of the SMs idle for the
// narrow weights (4096 output features); this keeps every SM streaming.
//
// Not batch invariant with the GEMM path (the sums run in another order), so CublasLtGemm
// uses it only under its per-shape policy (cublaslt_gemm.h).
#pragma once

#include <cstdint>

struct CUstream_st;

namespace folio::cuda {

constexpr int64_t kGemvMaxRows = 8;

// Whether bf16_gemv / fp8_gemv support the call: 1 <= n <= kGemvMaxRows, k % 16 == 0, x and w
// 16-byte aligned (rows of k values then stay aligned).
bool gemv_supports(const void* x, const void* w, int64_t n, int64_t k);

// x: (n, k) bf16; w: (m, k) bf16; y: (n, m) fp32. beta 0: y is only written. programmatic
// (sm_90+): launched as a programmatic dependent of the kernel ahead, prefetching its weights
// while that one finishes (programmatic_launch.cuh, GemmPolicy::programmatic_launch).
void bf16_gemv(const void* x, const void* w, float* y, int64_t n, int64_t m, int64_t k, float beta, CUstream_st* stream,
               bool programmatic = false);
// The same with w (m, k) E4M3 bytes and its per-row scales (device_matrix.h): y = (x w'^T) *
// scale[row] + beta y, the weights widened exactly to fp32 and x kept in bf16 (W8A16: at n <= 8
// the weights' bytes are the cost, so the activations need no quantizing).
void fp8_gemv(const void* x, const void* w, const float* scales, float* y, int64_t n, int64_t m, int64_t k, float beta,
              CUstream_st* stream, bool programmatic = false);

}  // namespace folio::cuda
