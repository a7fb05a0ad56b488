// Rows of BF16 -> FP8 E4M3 with one FP32 scale per row, on the GPU: the weights of
// `--quantization fp8` at load (a scale per output channel) and the activations before each FP8
// GEMM (a scale per token, computed on the fly). The bytes equal the CPU's definition:
//   amax = max |x_i|;  scale = amax / 448;  inv = 448 / amax  (both 0 when amax is 0)
//   q_i = E4M3(x_i * inv), round to nearest even, saturating (core/fp8.h)
// which is what kv_quantize_row does for the KV cache's fp8 rows.
#pragma once

#include <cstdint>

struct CUstream_st;

namespace folio::cuda {

// x: (rows, cols) bf16, rows ld_x elements apart; out: (rows, cols) E4M3 bytes, contiguous;
// scales: (rows,). cols % 8 == 0 and ld_x % 8 == 0, x 16-byte aligned.
void quantize_rows_e4m3(const uint16_t* x, int64_t rows, int64_t cols, int64_t ld_x, uint8_t* out, float* scales,
                        CUstream_st* stream);

}  // namespace folio::cuda
