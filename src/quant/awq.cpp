#include "quant/awq.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "quant/dense_blas.h"

namespace folio::quant {
namespace {

using MatrixF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Rows [r0, r0 + n) of D = W - Q(W diag s) / s for one matrix, as quantize_int4_rtn and
// Int4Matrix::dequantize compute it (the same bits): the scaled row in double, each group rounded
// to nearest, then w - q / s in float. row, out: cols doubles of scratch.
void rounding_error_rows(const float* w, int64_t r0, int64_t n, int64_t cols, const std::vector<float>& s,
                         const Int4Options& options, std::vector<double>& row, std::vector<double>& out, float* d) {
  const int64_t g = options.group_size;
  for (int64_t r = 0; r < n; ++r) {
    const float* wr = w + (r0 + r) * cols;
    for (int64_t c = 0; c < cols; ++c) row[static_cast<size_t>(c)] = wr[c] * s[static_cast<size_t>(c)];
    for (int64_t c0 = 0; c0 < cols; c0 += g) {  // (a last partial group: the checkpoint writer refuses that shape)
      round_group_to_nearest(row.data() + c0, std::min(g, cols - c0), options.symmetric, out.data() + c0);
    }
    float* dr = d + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      dr[c] = wr[c] - static_cast<float>(out[static_cast<size_t>(c)]) / s[static_cast<size_t>(c)];
    }
  }
}

// ||(W - Q(W diag s) / s) X^T||^2 over the matrices: sum of trace(D H D^T) from the Gram matrix
// h (normalized by `norm`), or, with x (tokens, cols) given, ||X D^T||^2 / norm.
double output_error(std::span<const AwqMatrix> matrices, int64_t cols, const std::vector<float>& s, const MatrixF& h,
                    std::span<const float> x, float norm, const Int4Options& options) {
  double total = 0.0;
  std::vector<double> row(static_cast<size_t>(cols)), out(static_cast<size_t>(cols));
  if (!x.empty()) {
    // kChunk rows of D at a time, X D^T straight from D's rows (the product reads them as
    // columns): every flop of this path, in a few MB (a whole D and its transpose were 0.5 GB a
    // thread at an 8B model's gate | up, and the transposing writes cost as much as the rounding).
    constexpr int64_t kChunk = 256;
    const auto tokens = static_cast<int64_t>(x.size()) / cols;
    MatrixF d(kChunk, cols), xd(tokens, kChunk);
    for (const AwqMatrix& m : matrices) {
      for (int64_t r0 = 0; r0 < m.rows; r0 += kChunk) {
        const int64_t n = std::min(kChunk, m.rows - r0);
        rounding_error_rows(m.w, r0, n, cols, s, options, row, out, d.data());
        xd.setZero();
        dense::gemm_nt_add(tokens, n, cols, 1.0f, x.data(), cols, d.data(), cols, xd.data(), kChunk);
        total += static_cast<double>(xd.leftCols(n).squaredNorm()) / norm;
      }
    }
    return total;
  }
  for (const AwqMatrix& m : matrices) {
    MatrixF d(m.rows, cols);
    rounding_error_rows(m.w, 0, m.rows, cols, s, options, row, out, d.data());
    // D H: rows x cols^2, nearly all of the search's flops (dense_blas.h: OpenBLAS where built).
    MatrixF dh = MatrixF::Zero(m.rows, cols);
    dense::gemm_add(m.rows, cols, cols, 1.0f, d.data(), cols, h.data(), cols, dh.data(), cols);
    total += static_cast<double>((dh.array() * d.array()).sum());
  }
  return total;
}

}  // namespace

AwqScales awq_search_scales(std::span<const AwqMatrix> matrices, int64_t cols, const std::vector<float>& rms,
                            const double* gram, const Int4Options& options, std::span<const float> inputs) {
  // A common factor of the Gram matrix changes no comparison; keep the sums in float's range.
  double largest = 0.0;
  for (int64_t i = 0; i < cols; ++i) largest = std::max(largest, gram[i * cols + i]);
  const float norm = largest > 0.0 ? static_cast<float>(largest) : 1.0f;
  // The inputs themselves where they are the smaller factor of the Gram matrix.
  const bool from_inputs = !inputs.empty() && static_cast<int64_t>(inputs.size()) / cols < cols;
  MatrixF h;
  if (!from_inputs) {
    h.resize(cols, cols);
    for (int64_t i = 0; i < cols; ++i) {
      for (int64_t j = 0; j <= i; ++j) h(i, j) = h(j, i) = static_cast<float>(gram[i * cols + j] / norm);
    }
  }
  const std::span<const float> x = from_inputs ? inputs : std::span<const float>{};
  // The grid's points are independent: one per thread at a time, each product on one core (the
  // rounding around it is as long as the product on one core: OpenBLAS's threads inside one
  // point would leave that part serial).
  constexpr int kGrid = 20;
  std::vector<std::vector<float>> scales(kGrid);
  std::vector<double> errors(kGrid);
  const int library_threads = dense::threads();
  dense::set_threads(1);
  ThreadPool pool;
  pool.parallel_for_dynamic(
      kGrid,
      [&](int, int64_t begin, int64_t end) {
        for (int64_t step = begin; step < end; ++step) {
          const double alpha = static_cast<double>(step) / kGrid;
          std::vector<float>& s = scales[static_cast<size_t>(step)];
          s.resize(static_cast<size_t>(cols));
          double log_sum = 0.0;
          for (int64_t c = 0; c < cols; ++c) {
            s[static_cast<size_t>(c)] =
                static_cast<float>(std::pow(std::max(static_cast<double>(rms[static_cast<size_t>(c)]), 1e-4), alpha));
            log_sum += std::log(static_cast<double>(s[static_cast<size_t>(c)]));
          }
          const auto mean = static_cast<float>(std::exp(log_sum / static_cast<double>(cols)));
          for (float& v : s) v /= mean;
          errors[static_cast<size_t>(step)] = output_error(matrices, cols, s, h, x, norm, options);
        }
      },
      1);
  dense::set_threads(library_threads);
  AwqScales best;
  const auto at = static_cast<size_t>(std::min_element(errors.begin(), errors.end()) - errors.begin());
  best.s = scales[at];
  best.alpha = static_cast<double>(at) / kGrid;
  best.error = errors[at];
  best.error_unscaled = errors[0];
  return best;
}

AwqClip awq_clip(float* w, int64_t rows, int64_t cols, const std::vector<float>& s, const double* gram,
                 const Int4Options& options) {
  const int64_t g = options.group_size;
  const int64_t groups = cols / g;
  // Each group's block of the scaled input's Gram matrix, H_ij / (s_i s_j), normalized by the
  // largest diagonal entry (a common factor changes no comparison).
  double norm = 0.0;
  for (int64_t i = 0; i < cols; ++i) {
    norm = std::max(norm,
                    gram[i * cols + i] / (static_cast<double>(s[static_cast<size_t>(i)]) * s[static_cast<size_t>(i)]));
  }
  if (!(norm > 0.0)) norm = 1.0;
  // AutoAWQ's grid: 20 steps, shrinking to at most half the range.
  constexpr int kSteps = 10;
  auto limit_of = [](double amax, int step) { return amax * (1.0 - step / 20.0); };
  std::vector<double> error(static_cast<size_t>(rows), 0.0), unclipped(static_cast<size_t>(rows), 0.0);
  std::vector<int64_t> clipped(static_cast<size_t>(rows), 0);
  // One group of every row at a time: each step's errors e (rows, g), then e H_gg for all rows
  // as one product (dense_blas.h) and each row's e^T H_gg e from it.
  MatrixF h(g, g), e(rows, g), eh(rows, g);
  std::vector<double> amax(static_cast<size_t>(rows)), best_error(static_cast<size_t>(rows));
  std::vector<int> best_step(static_cast<size_t>(rows));
  ThreadPool pool;
  for (int64_t b = 0; b < groups; ++b) {
    for (int64_t i = 0; i < g; ++i) {
      for (int64_t j = 0; j <= i; ++j) {
        const int64_t gi = b * g + i, gj = b * g + j;
        const double v = gram[gi * cols + gj] /
                         (static_cast<double>(s[static_cast<size_t>(gi)]) * s[static_cast<size_t>(gj)] * norm);
        h(i, j) = h(j, i) = static_cast<float>(v);
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      double a = 0.0;
      for (int64_t i = 0; i < g; ++i) a = std::max(a, std::fabs(static_cast<double>(w[r * cols + b * g + i])));
      amax[static_cast<size_t>(r)] = a;
    }
    for (int step = 0; step < kSteps; ++step) {
      pool.parallel_for_dynamic(
          rows,
          [&](int, int64_t begin, int64_t end) {
            std::vector<double> clamped(static_cast<size_t>(g)), q(static_cast<size_t>(g));
            for (int64_t r = begin; r < end; ++r) {
              const float* row = w + r * cols + b * g;
              const double limit = limit_of(amax[static_cast<size_t>(r)], step);
              for (int64_t i = 0; i < g; ++i) {
                clamped[static_cast<size_t>(i)] = std::clamp(static_cast<double>(row[i]), -limit, limit);
              }
              round_group_to_nearest(clamped.data(), g, options.symmetric, q.data());
              for (int64_t i = 0; i < g; ++i) e(r, i) = static_cast<float>(row[i] - q[static_cast<size_t>(i)]);
            }
          },
          64);
      eh.setZero();
      dense::gemm_add(rows, g, g, 1.0f, e.data(), g, h.data(), g, eh.data(), g);
      for (int64_t r = 0; r < rows; ++r) {
        double err = 0.0;
        for (int64_t i = 0; i < g; ++i) err += static_cast<double>(e(r, i)) * eh(r, i);
        const auto at = static_cast<size_t>(r);
        if (step == 0) unclipped[at] += err;
        if (step == 0 || err < best_error[at]) {
          best_error[at] = err;
          best_step[at] = step;
        }
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      const auto at = static_cast<size_t>(r);
      error[at] += best_error[at];
      if (best_step[at] == 0) continue;
      ++clipped[at];
      const double limit = limit_of(amax[at], best_step[at]);
      float* row = w + r * cols + b * g;
      for (int64_t i = 0; i < g; ++i)
        row[i] = static_cast<float>(std::clamp(static_cast<double>(row[i]), -limit, limit));
    }
  }
  AwqClip out;
  out.groups = rows * groups;
  for (int64_t r = 0; r < rows; ++r) {
    out.error += error[static_cast<size_t>(r)];
    out.error_unclipped += unclipped[static_cast<size_t>(r)];
    out.clipped += clipped[static_cast<size_t>(r)];
  }
  return out;
}

}  // namespace folio::quant
