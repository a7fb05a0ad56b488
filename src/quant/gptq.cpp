#include "quant/gptq.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "core/fp16.h"
#include "quant/dense_blas.h"

namespace folio::quant {
namespace {

// Float32 throughout, as AutoGPTQ computes (its Cholesky included): half the memory and twice
// the SIMD lanes of double; the damping keeps H's factorization stable in float.
using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct GroupParams {
  float scale = 1.0f;
  uint8_t zero = 8;
};

// One row's group from its values: asymmetric maps [min(x, 0), max(x, 0)] onto 0..15 (zero
// inside the range, as AutoGPTQ does), symmetric [-amax, amax] with the zero at 8.
template <class T>
GroupParams group_params(const T* x, int64_t n, int64_t stride, bool symmetric) {
  double lo = 0.0, hi = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, static_cast<double>(x[i * stride]));
    hi = std::max(hi, static_cast<double>(x[i * stride]));
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
// (n^3 / 3) and one triangular inverse (n^3 / 3), in place: H's storage becomes U, one n x n
// matrix at the peak (0.8 GB for an 8B model's 14,336-input down projection). False (H
// clobbered) when H is not positive definite (numerically).
bool upper_cholesky_of_inverse(Matrix& H) {
  const int64_t n = H.rows();
  H.reverseInPlace();
  if (!dense::cholesky_lower(H.data(), n)) return false;  // H's lower triangle becomes L
  H.triangularView<Eigen::StrictlyUpper>().setZero();
  H.reverseInPlace();  // R = J L J, upper
  dense::invert_upper(H.data(), n);
  return true;
}

}  // namespace

bool gptq_inverse_factor(const float* h, int64_t n, float* u) {
  Matrix H = Eigen::Map<const Matrix>(h, n, n);
  if (!upper_cholesky_of_inverse(H)) return false;
  Eigen::Map<Matrix>(u, n, n) = H;
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
  // Inputs that were never active carry no information: their weights do not matter.
  // Their H_ii (0) becomes 1, which keeps H invertible.
  std::vector<double> diagonal(static_cast<size_t>(cols));
  double mean_diagonal = 0.0;
  for (int64_t i = 0; i < cols; ++i) {
    const double h = gram[order[static_cast<size_t>(i)] * (cols + 1)];
    if (h == 0.0) W.col(i).setZero();
    diagonal[static_cast<size_t>(i)] = h == 0.0 ? 1.0 : h;
    mean_diagonal += diagonal[static_cast<size_t>(i)];
  }
  mean_diagonal /= static_cast<double>(cols);
  auto damped_h = [&](double damp, Matrix& H) {
    H.resize(cols, cols);
    for (int64_t i = 0; i < cols; ++i) {
      for (int64_t j = 0; j <= i; ++j) {
        const int64_t a = std::max(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
        const int64_t b = std::min(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
        H(i, j) = H(j, i) = static_cast<float>(gram[a * cols + b]);  // the lower triangle of the input
      }
      H(i, i) = static_cast<float>(diagonal[static_cast<size_t>(i)] + damp * mean_diagonal);
    }
  };
  // U: the upper Cholesky factor of H^-1; row i of U beyond the diagonal is how column i's
  // error is spread over the later columns, U_ii its scale. Where rounding leaves H not
  // positive definite, more damping (AutoGPTQ's remedy, by hand there).
  Matrix U;
  bool factored = false;
  for (double damp = options.damp; !factored && damp < 10.0; damp *= 10.0) {
    damped_h(damp, U);
    factored = upper_cholesky_of_inverse(U);
  }
  if (!factored) return {};

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
        errors(r, i - i1) = static_cast<float>((W(r, i) - dequantize_value(q, params[static_cast<size_t>(r)])) / d);
      }
      // Within the block at once; beyond it, once per block (the lazy batch update).
      if (i + 1 < i2) {
        W.block(0, i + 1, rows, i2 - i - 1).noalias() -= errors.col(i - i1) * U.block(i, i + 1, 1, i2 - i - 1);
      }
    }
    if (i2 < cols) {
      // W[:, i2:] -= errors U[i1:i2, i2:]: most of GPTQ's flops after the factorization.
      dense::gemm_add(rows, cols - i2, width, -1.0f, errors.data(), width, &U(i1, i2), cols, &W(0, i2), cols);
    }
  }
  for (int64_t p = 0; p < cols; ++p)
    m.g_idx[static_cast<size_t>(order[static_cast<size_t>(p)])] = static_cast<int32_t>(p / g);
  return m;
}

}  // namespace folio::quant
