// quant/gptq.h against its definition: round to nearest within the scale's half step, GPTQ
// equal to RTN where the inputs are uncorrelated (nothing to spread the error over), and below
// RTN's output error on correlated inputs -- the error it minimizes, ||(W - Wq) X^T||, computed
// here in float64 from the same X whose Gram matrix GPTQ was given; act-order's groups.
#include <gtest/gtest.h>
#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "quant/gptq.h"

namespace folio::quant {
namespace {

struct Layer {
  int64_t rows, cols, tokens;
  std::vector<float> w;  // (rows, cols)
  std::vector<float> x;  // (tokens, cols)
  std::vector<double> gram;
};

// Inputs with a few strong, correlated channels (what real activations look like).
Layer make_layer(int64_t rows, int64_t cols, int64_t tokens, bool correlated, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Layer l{rows,
          cols,
          tokens,
          std::vector<float>(static_cast<size_t>(rows * cols)),
          std::vector<float>(static_cast<size_t>(tokens * cols)),
          std::vector<double>(static_cast<size_t>(cols * cols))};
  for (float& v : l.w) v = 0.05f * normal(rng);
  const int64_t factors = 8;
  std::vector<float> mix(static_cast<size_t>(factors * cols));
  for (float& v : mix) v = normal(rng);
  for (int64_t t = 0; t < tokens; ++t) {
    float f[8];
    for (float& v : f) v = normal(rng);
    for (int64_t c = 0; c < cols; ++c) {
      float v = 0.3f * normal(rng);
      if (correlated) {
        for (int64_t k = 0; k < factors; ++k) v += f[k] * mix[static_cast<size_t>(k * cols + c)];
        if (c % 17 == 3) v *= 6.0f;  // outlier channels
      }
      l.x[static_cast<size_t>(t * cols + c)] = v;
    }
  }
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t i = 0; i < cols; ++i) {
      for (int64_t j = 0; j <= i; ++j) {
        l.gram[static_cast<size_t>(i * cols + j)] +=
            static_cast<double>(l.x[static_cast<size_t>(t * cols + i)]) * l.x[static_cast<size_t>(t * cols + j)];
      }
    }
  }
  return l;
}

// ||(W - Wq) X^T||_F^2 in float64.
double output_error(const Layer& l, const std::vector<float>& wq) {
  double total = 0.0;
  for (int64_t r = 0; r < l.rows; ++r) {
    for (int64_t t = 0; t < l.tokens; ++t) {
      double s = 0.0;
      for (int64_t c = 0; c < l.cols; ++c) {
        s += (static_cast<double>(l.w[static_cast<size_t>(r * l.cols + c)]) - wq[static_cast<size_t>(r * l.cols + c)]) *
             l.x[static_cast<size_t>(t * l.cols + c)];
      }
      total += s * s;
    }
  }
  return total;
}

TEST(Int4Rtn, EveryWeightWithinHalfAStepOfItsValue) {
  const Layer l = make_layer(16, 256, 1, false, 1);
  for (bool symmetric : {false, true}) {
    const Int4Matrix m = quantize_int4_rtn(l.w.data(), l.rows, l.cols, {.group_size = 64, .symmetric = symmetric});
    ASSERT_EQ(m.groups(), 4);
    const std::vector<float> wq = m.dequantize();
    for (int64_t r = 0; r < l.rows; ++r) {
      for (int64_t c = 0; c < l.cols; ++c) {
        const size_t g = static_cast<size_t>((c / 64) * l.rows + r);
        EXPECT_LE(m.q[static_cast<size_t>(r * l.cols + c)], 15);
        EXPECT_GE(m.zeros[g], 1);
        if (symmetric) {
          EXPECT_EQ(m.zeros[g], 8);
        }
        // Half a step, plus the clamping of a symmetric range's top (15 - 8 = 7 steps up).
        const double bound = m.scales[g] * (symmetric ? 1.0 : 0.5) + 1e-7;
        EXPECT_LE(std::abs(wq[static_cast<size_t>(r * l.cols + c)] - l.w[static_cast<size_t>(r * l.cols + c)]), bound)
            << r << "," << c;
      }
    }
  }
  EXPECT_TRUE(quantize_int4_rtn(l.w.data(), l.rows, l.cols, {.group_size = 96}).q.empty());  // 256 % 96
}

TEST(Gptq, EqualsRoundToNearestWhenInputsAreUncorrelated) {
  Layer l = make_layer(8, 128, 1, false, 2);
  // A diagonal Gram matrix: no column's error can be compensated by another.
  std::fill(l.gram.begin(), l.gram.end(), 0.0);
  for (int64_t c = 0; c < l.cols; ++c) l.gram[static_cast<size_t>(c * l.cols + c)] = 1.0 + c % 5;
  const Int4Options options{.group_size = 32};
  const Int4Matrix gptq = quantize_int4_gptq(l.w.data(), l.rows, l.cols, l.gram.data(), options);
  const Int4Matrix rtn = quantize_int4_rtn(l.w.data(), l.rows, l.cols, options);
  EXPECT_EQ(gptq.q, rtn.q);
  EXPECT_EQ(gptq.scales, rtn.scales);
  EXPECT_EQ(gptq.zeros, rtn.zeros);
}

TEST(Gptq, LowersTheOutputErrorOnCorrelatedInputs) {
  const Layer l = make_layer(32, 256, 512, true, 3);
  for (bool symmetric : {false, true}) {
    for (bool act_order : {false, true}) {
      const Int4Options options{.group_size = 64, .symmetric = symmetric, .act_order = act_order};
      const double rtn = output_error(l, quantize_int4_rtn(l.w.data(), l.rows, l.cols, options).dequantize());
      const Int4Matrix m = quantize_int4_gptq(l.w.data(), l.rows, l.cols, l.gram.data(), options);
      const double gptq = output_error(l, m.dequantize());
      std::printf("  sym %d act-order %d: output error GPTQ / RTN = %.3f\n", symmetric, act_order, gptq / rtn);
      EXPECT_LT(gptq, 0.7 * rtn) << "sym " << symmetric << " act-order " << act_order;
    }
  }
}

TEST(Gptq, ActOrderGroupsFollowDecreasingInputEnergy) {
  const Layer l = make_layer(8, 128, 256, true, 4);
  const Int4Matrix m =
      quantize_int4_gptq(l.w.data(), l.rows, l.cols, l.gram.data(), {.group_size = 32, .act_order = true});
  std::vector<int> per_group(4, 0);
  for (int32_t g : m.g_idx) {
    ASSERT_GE(g, 0);
    ASSERT_LT(g, 4);
    ++per_group[static_cast<size_t>(g)];
  }
  EXPECT_EQ(per_group, std::vector<int>(4, 32));
  // Every column of an earlier group has at least the energy of every column of a later one.
  for (int64_t a = 0; a < l.cols; ++a) {
    for (int64_t b = 0; b < l.cols; ++b) {
      if (m.g_idx[static_cast<size_t>(a)] < m.g_idx[static_cast<size_t>(b)]) {
        EXPECT_GE(l.gram[static_cast<size_t>(a * l.cols + a)], l.gram[static_cast<size_t>(b * l.cols + b)]);
      }
    }
  }
  EXPECT_NE(m.g_idx[0], 0) << "channel 3 (an outlier) comes first, not column 0";
}

TEST(Gptq, InactiveInputsQuantizeToZero) {
  Layer l = make_layer(4, 64, 64, true, 5);
  for (int64_t c = 0; c < l.cols; ++c) {
    for (int64_t j = 0; j < l.cols; ++j) {
      if (c == 10 || j == 10) l.gram[static_cast<size_t>(std::max(c, j) * l.cols + std::min(c, j))] = 0.0;
    }
  }
  const Int4Matrix m = quantize_int4_gptq(l.w.data(), l.rows, l.cols, l.gram.data(), {.group_size = 32});
  const std::vector<float> wq = m.dequantize();
  for (int64_t r = 0; r < l.rows; ++r) EXPECT_EQ(wq[static_cast<size_t>(r * l.cols + 10)], 0.0f);
}

// The factor without H^-1 formed is the Cholesky factor of the explicit inverse (Eigen's LLT of
// it in double, as GPTQ's reference computes it), on an ill-conditioned Gram matrix like a
// layer's, to float32's precision; at 600 inputs the libraries' blocked paths run too.
TEST(Gptq, InverseFactorIsTheCholeskyFactorOfTheInverse) {
  for (int64_t n : {97, 600}) {
    std::mt19937_64 rng(5);
    std::normal_distribution<double> dist(0.0, 1.0);
    Eigen::MatrixXd x(2 * n, n);
    for (int64_t i = 0; i < x.rows(); ++i) {
      for (int64_t j = 0; j < n; ++j) x(i, j) = dist(rng) * (j % 7 == 0 ? 30.0 : 1.0);  // outlier channels
    }
    Eigen::MatrixXd h = x.transpose() * x;
    h.diagonal().array() += 0.01 * h.diagonal().mean();
    using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const RowMajor hr = h.cast<float>();
    RowMajor u(n, n);
    ASSERT_TRUE(gptq_inverse_factor(hr.data(), n, u.data()));
    const Eigen::MatrixXd want = Eigen::LLT<Eigen::MatrixXd>(hr.cast<double>().inverse()).matrixU();
    const double scale = want.cwiseAbs().maxCoeff();
    const Eigen::MatrixXd got = u.cast<double>();
    EXPECT_LT((got - want).cwiseAbs().maxCoeff(), 1e-3 * scale) << n;
    EXPECT_LT((got.transpose() * got * hr.cast<double>() - Eigen::MatrixXd::Identity(n, n)).cwiseAbs().maxCoeff(), 1e-2)
        << n;
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_GT(u(i, i), 0.0f);
      for (int64_t j = 0; j < i; ++j) ASSERT_EQ(u(i, j), 0.0f);
    }
    // An indefinite matrix is refused, not factored into garbage.
    RowMajor indefinite = hr;
    indefinite(5, 5) = -1.0f;
    EXPECT_FALSE(gptq_inverse_factor(indefinite.data(), n, u.data()));
  }
}

}  // namespace
}  // namespace folio::quant
