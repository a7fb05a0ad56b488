// AWQ's activation-aware scaling (Lin et al., MLSys 2024): before rounding, every input column
// of the matrices reading one activation is multiplied by s_i, and the activation divided by s_i
// where it is made (folded into the RMSNorm weight before Q|K|V and gate|up, into up's rows before
// down), so the product is unchanged but the columns that meet large activations get more of the
// 4-bit grid. s = a^alpha with a the activation's magnitude per channel (here its RMS over the
// calibration text), normalized to a geometric mean of 1; alpha is searched on a grid of 20 for
// the least output error ||(W - Q(W diag s) diag s^-1) X^T||^2, computed exactly from the input's
// Gram matrix (trace(D H D^T)) instead of from sampled activations. AutoAWQ's second search
// (clipping each group's range) is not done.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "quant/gptq.h"

namespace folio::quant {

struct AwqMatrix {
  const float* w = nullptr;  // (rows, cols) row-major
  int64_t rows = 0;
};

struct AwqScales {
  std::vector<float> s;  // (cols,): multiply the matrices' columns, divide the activation
  double alpha = 0.0;
  double error = 0.0;           // the output error at the chosen alpha
  double error_unscaled = 0.0;  // at alpha = 0 (round to nearest)
};

// rms: (cols,) the input's RMS per channel; gram: (cols, cols), lower triangle, sum x x^T.
AwqScales awq_search_scales(std::span<const AwqMatrix> matrices, int64_t cols, const std::vector<float>& rms,
                            const double* gram, const Int4Options& options);

}  // namespace folio::quant
