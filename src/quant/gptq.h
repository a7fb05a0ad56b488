// 4-bit weights in groups, as AWQ / GPTQ checkpoints hold them (w = scale * (q - zero), q and
// zero in 0..15, one scale and zero per output row and group of input columns), and two ways
// to choose them for a float matrix:
//  - round to nearest (RTN): each group's range mapped onto 0..15, each weight rounded alone;
//  - GPTQ (Frantar et al., ICLR 2023): columns quantized one at a time, each one's rounding
//    error spread over the columns not yet quantized through the inverse of the layer's input
//    Gram matrix H = sum x x^T (so the layer's output on the calibration inputs moves least),
//    in blocks of 128 columns with lazy updates; optionally in act-order (columns by decreasing
//    H_ii, the inputs that carry most energy first, whose groups then follow that order: g_idx).
// Scales are rounded to fp16 before the weights are rounded against them, so a checkpoint's
// fp16 scales dequantize to exactly the values chosen here.
#pragma once

#include <cstdint>
#include <vector>

namespace folio::quant {

struct Int4Options {
  int64_t group_size = 128;  // input columns per group (cols must be a multiple)
  bool symmetric = false;    // zero fixed at 8 (GPTQ sym=True); else per-group min / max
  bool act_order = false;    // GPTQ's desc_act: columns by decreasing H_ii (GPTQ only)
  double damp = 0.01;        // GPTQ: H + damp * mean(diag H) * I, for a stable inverse
};

struct Int4Matrix {
  int64_t rows = 0, cols = 0, group_size = 0;
  std::vector<uint8_t> q;      // (rows, cols), 0..15, columns in the matrix's own order
  std::vector<float> scales;   // (groups, rows), each an fp16 value
  std::vector<uint8_t> zeros;  // (groups, rows), 1..15 (0 cannot be stored by GPTQ format v1)
  std::vector<int32_t> g_idx;  // (cols,): each column's group

  int64_t groups() const { return cols / group_size; }
  // w[r][c] = scale * (q - zero) of c's group.
  std::vector<float> dequantize() const;
};

// One group of n values rounded to nearest as quantize_int4_rtn rounds it (its range, fp16
// scale and zero): out[i] is the value x[i] dequantizes to.
void round_group_to_nearest(const double* x, int64_t n, bool symmetric, double* out);

// w: (rows, cols) row-major. The empty matrix when cols is not a multiple of the group size.
Int4Matrix quantize_int4_rtn(const float* w, int64_t rows, int64_t cols, const Int4Options& options);

// The factor GPTQ spreads errors with: U upper triangular with H^-1 = U^T U, for H (n, n)
// symmetric positive definite (false, u untouched, where it is not); h and u row-major, float32
// as GPTQ computes it (quant/dense_blas.h: OpenBLAS where the build has it).
bool gptq_inverse_factor(const float* h, int64_t n, float* u);

// gram: (cols, cols), sum over calibration tokens of x x^T for this matrix's input (only the
// lower triangle is read). Columns never active (H_ii = 0) are quantized as zeros. The empty
// matrix also when H stays indefinite however much it is damped.
Int4Matrix quantize_int4_gptq(const float* w, int64_t rows, int64_t cols, const double* gram,
                              const Int4Options& options);

}  // namespace folio::quant
