// AWQ's activation-aware scaling (Lin et al., MLSys 2024): before rounding, every input column
// of the matrices reading one activation is multiplied by s_i, and the activation divided by s_i
// where it is made (folded into the RMSNorm weight before Q|K|V and gate|up, into up's rows before
// down), so the product is unchanged but the columns that meet large activations get more of the
// 4-bit grid. s = a^alpha with a the activation's magnitude per channel (here its RMS over the
// calibration text), normalized to a geometric mean of 1; alpha is searched on a grid of 20 for
// the least output error ||(W - Q(W diag s) diag s^-1) X^T||^2, computed exactly from the input's
// Gram matrix (trace(D H D^T)) instead of from sampled activations. Then AWQ's second search
// (awq_clip): each row's group of the scaled weights is clamped to +-r * its largest magnitude,
// r on AutoAWQ's grid (1, 0.95, ..., 0.55), whichever gives the group's part of the output the
// least error e^T H_gg e (e: the scaled weights minus their rounding, H_gg: the group's block of
// the scaled input's Gram matrix); clipping a few outliers buys the rest a finer grid.
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
// inputs: empty, or the rows x that gram sums, (tokens, cols) row-major. With fewer tokens than
// columns the error is computed from them as ||D X^T||^2 (rows x cols x tokens multiply-adds a
// grid point instead of rows x cols^2: 4x fewer at an 8B model's 4,096 inputs and 1,024
// calibration tokens, 14x at its down projection); the same number up to float rounding.
AwqScales awq_search_scales(std::span<const AwqMatrix> matrices, int64_t cols, const std::vector<float>& rms,
                            const double* gram, const Int4Options& options, std::span<const float> inputs = {});

struct AwqClip {
  double error = 0.0;            // sum over groups of the chosen clip's output error
  double error_unclipped = 0.0;  // the same with every group at r = 1 (plain rounding)
  int64_t groups = 0, clipped = 0;
};

// w: (rows, cols) the scaled weights (W diag s), clamped in place where a clip wins; s: (cols,)
// the scales; gram: (cols, cols), lower triangle, sum x x^T of the unscaled input (the scaled
// weights read x / s). cols must be a multiple of options.group_size.
AwqClip awq_clip(float* w, int64_t rows, int64_t cols, const std::vector<float>& s, const double* gram,
                 const Int4Options& options);

}  // namespace folio::quant
