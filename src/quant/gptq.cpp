#include "quant/gptq.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "core/fp16.h"

namespace folio::quant {
namespace {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct GroupParams {
  float scale = 1.0f;
  uint8_t zero = 8;
};

// One row's group from its values: asymmetric maps [min(x, 0), max(x, 0)] onto 0..15 (zero
// inside the range, as AutoGPTQ does), symmetric [-amax, amax] with the zero at 8.
GroupParams group_params(const double* x, int64_t n, int64_t stride, bool symmetric) {
  double lo = 0.0, hi = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, x[i * stride]);
    hi = std::max(hi, x[i * stride]);
  }
  if (symmetric) {
    hi = std::max(-lo, hi);
    lo = -hi;
  }
  if (hi == lo) hi = lo + 1e-6;  // a constant group
  GroupParams p;
  // fp16 first: the scale a checkpoint stores is the scale the weights are rounded against.
  p.scale = fp16_to_fp32(fp32_to_fp16(static_cast<float>((hi - lo) / 15.0)));
  if (p.scale == 0.0f) p.scale = fp16_to_fp32(1);  // smallest subnormal: all weights round to the zero
  p.zero = symmetric ? 8 : static_cast<uint8_t>(std::clamp(std::lround(-lo / p.scale), 1L, 15L));
  return p;
}

uint8_t quantize_value(double w, const GroupParams& p) {
  return static_cast<uint8_t>(std::clamp(std::lround(w / p.scale) + p.zero, 0L, 15L));
}

double dequantize_value(uint8_t q, const GroupParams& p) {
  return static_cast<double>(p.scale * static_cast<float>(static_cast<int>(q) - p.zero));
}

Int4Matrix empty_like(int64_t rows, int64_t cols, int64_t group_size) {
  Int4Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.group_size = group_size;
  m.q.resize(static_cast<size_t>(rows * cols));
  m.scales.resize(static_cast<size_t>(rows * (cols / group_size)));
  m.zeros.resize(m.scales.size());
  m.g_idx.resize(static_cast<size_t>(cols));
  return m;
}

// U upper with H^-1 = U^T U, without forming H^-1 (which costs two n^3 triangular solves and
// a second factorization): with J the order-reversing permutation, J H J = L L^T makes
// H = R R^T with R = J L J upper triangular, so H^-1 = R^-T R^-1 and U = R^-1. One Cholesky
// (n^3 / 3) and one triangular solve (n^3): half the flops, which GPTQ on an 8B model's
// 14336-input down projection spends most of its time on. In place, H's storage becoming R:
// two n x n matrices at the peak (3.3 GB for a 14336-input matrix; a 70B model's 28672-input
// down projection needs 13 GB).
// An empty matrix when H is not positive definite (numerically).
Matrix upper_cholesky_of_inverse(Matrix H) {
  H.reverseInPlace();
  Eigen::LLT<Eigen::Ref<Matrix>> llt(H);  // H's lower triangle becomes L
  if (llt.info() != Eigen::Success) return {};
  H.triangularView<Eigen::StrictlyUpper>().setZero();
  H.reverseInPlace();  // R = J L J, upper
  Matrix U = Matrix::Identity(H.rows(), H.cols());
  H.triangularView<Eigen::Upper>().solveInPlace(U);
  return U;
}

}  // namespace

bool gptq_inverse_factor(const double* h, int64_t n, double* u) {
  const Matrix U = upper_cholesky_of_inverse(Eigen::Map<const Matrix>(h, n, n));
  if (U.size() == 0) return false;
  Eigen::Map<Matrix>(u, n, n) = U;
  return true;
}

void round_group_to_nearest(const double* x, int64_t n, bool symmetric, double* out) {
  const GroupParams p = group_params(x, n, 1, symmetric);
  for (int64_t i = 0; i < n; ++i) out[i] = dequantize_value(quantize_value(x[i], p), p);
}

std::vector<float> Int4Matrix::dequantize() const {
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const size_t g = static_cast<size_t>(g_idx[static_cast<size_t>(c)] * rows + r);
      w[static_cast<size_t>(r * cols + c)] =
          scales[g] * static_cast<float>(static_cast<int>(q[static_cast<size_t>(r * cols + c)]) - zeros[g]);
    }
  }
  return w;
}

Int4Matrix quantize_int4_rtn(const float* w, int64_t rows, int64_t cols, const Int4Options& options) {
  const int64_t g = options.group_size;
  if (g <= 0 || cols % g != 0) return {};
  Int4Matrix m = empty_like(rows, cols, g);
  std::vector<double> row(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) m.g_idx[static_cast<size_t>(c)] = static_cast<int32_t>(c / g);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) row[static_cast<size_t>(c)] = w[r * cols + c];
    for (int64_t group = 0; group < cols / g; ++group) {
      const GroupParams p = group_params(row.data() + group * g, g, 1, options.symmetric);
      m.scales[static_cast<size_t>(group * rows + r)] = p.scale;
      m.zeros[static_cast<size_t>(group * rows + r)] = p.zero;
      for (int64_t c = group * g; c < (group + 1) * g; ++c) {
        m.q[static_cast<size_t>(r * cols + c)] = quantize_value(row[static_cast<size_t>(c)], p);
      }
    }
  }
  return m;
}

Int4Matrix quantize_int4_gptq(const float* w, int64_t rows, int64_t cols, const double* gram,
                              const Int4Options& options) {
  const int64_t g = options.group_size;
  if (g <= 0 || cols % g != 0) return {};
  // The columns in processing order: act-order sorts them by decreasing H_ii.
  std::vector<int64_t> order(static_cast<size_t>(cols));
  std::iota(order.begin(), order.end(), 0);
  if (options.act_order) {
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return gram[a * cols + a] > gram[b * cols + b]; });
  }
  Matrix W(rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t p = 0; p < cols; ++p) W(r, p) = w[r * cols + order[static_cast<size_t>(p)]];
  }
  // H in processing order, its diagonal raised by damp times its mean so that it inverts.
  auto damped_h = [&](double damp) {
    Matrix H(cols, cols);
    for (int64_t i = 0; i < cols; ++i) {
      for (int64_t j = 0; j <= i; ++j) {
        const int64_t a = std::max(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
        const int64_t b = std::min(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
        H(i, j) = H(j, i) = gram[a * cols + b];  // the lower triangle of the input
      }
    }
    // Inputs that were never active carry no information: their weights do not matter.
    for (int64_t i = 0; i < cols; ++i) {
      if (H(i, i) == 0.0) {
        H(i, i) = 1.0;
        W.col(i).setZero();
      }
    }
    H.diagonal().array() += damp * H.diagonal().mean();
    return H;
  };
  // U: the upper Cholesky factor of H^-1; row i of U beyond the diagonal is how column i's
  // error is spread over the later columns, U_ii its scale. Where rounding leaves H not
  // positive definite, more damping (AutoGPTQ's remedy, by hand there).
  Matrix U;
  for (double damp = options.damp; U.size() == 0 && damp < 10.0; damp *= 10.0) {
    U = upper_cholesky_of_inverse(damped_h(damp));
  }
  if (U.size() == 0) return {};

  Int4Matrix m = empty_like(rows, cols, g);
  std::vector<GroupParams> params(static_cast<size_t>(rows));
  constexpr int64_t kBlock = 128;
  for (int64_t i1 = 0; i1 < cols; i1 += kBlock) {
    const int64_t i2 = std::min(cols, i1 + kBlock), width = i2 - i1;
    Matrix errors(rows, width);
    for (int64_t i = i1; i < i2; ++i) {
      if (i % g == 0) {
        // The group's range from its columns as they are now (earlier errors spread in).
        for (int64_t r = 0; r < rows; ++r) {
          params[static_cast<size_t>(r)] = group_params(&W(r, i), g, 1, options.symmetric);
          m.scales[static_cast<size_t>((i / g) * rows + r)] = params[static_cast<size_t>(r)].scale;
          m.zeros[static_cast<size_t>((i / g) * rows + r)] = params[static_cast<size_t>(r)].zero;
        }
      }
      const double d = U(i, i);
      for (int64_t r = 0; r < rows; ++r) {
        const uint8_t q = quantize_value(W(r, i), params[static_cast<size_t>(r)]);
        m.q[static_cast<size_t>(r * cols + order[static_cast<size_t>(i)])] = q;
        errors(r, i - i1) = (W(r, i) - dequantize_value(q, params[static_cast<size_t>(r)])) / d;
      }
      // Within the block at once; beyond it, once per block (the lazy batch update).
      if (i + 1 < i2) {
        W.block(0, i + 1, rows, i2 - i - 1).noalias() -= errors.col(i - i1) * U.block(i, i + 1, 1, i2 - i - 1);
      }
    }
    if (i2 < cols) W.rightCols(cols - i2).noalias() -= errors * U.block(i1, i2, width, cols - i2);
  }
  for (int64_t p = 0; p < cols; ++p)
    m.g_idx[static_cast<size_t>(order[static_cast<size_t>(p)])] = static_cast<int32_t>(p / g);
  return m;
}

}  // namespace folio::quant
