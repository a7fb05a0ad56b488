// quant/dense_blas.h: each implementation (Eigen always; OpenBLAS where the build has it)
// against float64 loops, at sizes past both libraries' block sizes, with strides and the
// triangles each call must leave alone.
#include "quant/dense_blas.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace folio::quant::dense {
namespace {

struct Impl {
  std::string name;
  bool (*cholesky_lower)(float*, int64_t);
  void (*invert_upper)(float*, int64_t);
  void (*gemm_add)(int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t, float*, int64_t);
  void (*gemm_nt_add)(int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t, float*, int64_t);
  void (*syrk_lower_add)(double*, int64_t, const double*, int64_t);
};

std::vector<Impl> implementations() {
  std::vector<Impl> out = {{"eigen", eigen::cholesky_lower, eigen::invert_upper, eigen::gemm_add, eigen::gemm_nt_add,
                            eigen::syrk_lower_add}};
  if (openblas::available()) {
    out.push_back({"openblas", openblas::cholesky_lower, openblas::invert_upper, openblas::gemm_add,
                   openblas::gemm_nt_add, openblas::syrk_lower_add});
  }
  return out;
}

std::vector<double> random_values(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> dist(0.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

// A well-conditioned SPD matrix: X^T X / rows + I.
std::vector<double> spd(int64_t n, uint64_t seed) {
  const std::vector<double> x = random_values(static_cast<size_t>(2 * n * n), seed);
  std::vector<double> a(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (int64_t r = 0; r < 2 * n; ++r) s += x[static_cast<size_t>(r * n + i)] * x[static_cast<size_t>(r * n + j)];
      a[static_cast<size_t>(i * n + j)] = s / static_cast<double>(2 * n) + (i == j ? 1.0 : 0.0);
    }
  }
  return a;
}

TEST(DenseBlas, CholeskyLowerReproducesTheMatrixAndLeavesTheUpperTriangle) {
  for (const Impl& impl : implementations()) {
    for (int64_t n : {5, 300}) {
      const std::vector<double> a = spd(n, 1);
      std::vector<float> m(a.begin(), a.end());
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = i + 1; j < n; ++j) m[static_cast<size_t>(i * n + j)] = 7.0f;  // must survive
      }
      ASSERT_TRUE(impl.cholesky_lower(m.data(), n)) << impl.name;
      double worst = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j <= i; ++j) {
          double s = 0.0;
          for (int64_t q = 0; q <= j; ++q)
            s += double{m[static_cast<size_t>(i * n + q)]} * m[static_cast<size_t>(j * n + q)];
          worst = std::max(worst, std::abs(s - a[static_cast<size_t>(i * n + j)]));
        }
        for (int64_t j = i + 1; j < n; ++j) ASSERT_EQ(m[static_cast<size_t>(i * n + j)], 7.0f) << impl.name;
      }
      EXPECT_LT(worst, 1e-4) << impl.name << " n=" << n;
      // Not positive definite: refused.
      std::vector<float> bad(a.begin(), a.end());
      bad[static_cast<size_t>(3 * n + 3)] = -1.0f;
      EXPECT_FALSE(impl.cholesky_lower(bad.data(), n)) << impl.name;
    }
  }
}

TEST(DenseBlas, InvertUpperGivesTheInverseAndLeavesTheLowerTriangle) {
  for (const Impl& impl : implementations()) {
    for (int64_t n : {6, 300}) {
      const std::vector<double> v = random_values(static_cast<size_t>(n * n), 2);
      std::vector<float> u(static_cast<size_t>(n * n));
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          const double x = v[static_cast<size_t>(i * n + j)];
          u[static_cast<size_t>(i * n + j)] = j < i ? 5.0f : static_cast<float>(j == i ? 2.0 + std::abs(x) : 0.1 * x);
        }
      }
      std::vector<float> inv = u;
      impl.invert_upper(inv.data(), n);
      double worst = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          if (j < i) {
            ASSERT_EQ(inv[static_cast<size_t>(i * n + j)], 5.0f) << impl.name;
            continue;
          }
          double s = 0.0;  // (U U^-1)(i, j), both upper
          for (int64_t q = i; q <= j; ++q)
            s += double{u[static_cast<size_t>(i * n + q)]} * inv[static_cast<size_t>(q * n + j)];
          worst = std::max(worst, std::abs(s - (i == j ? 1.0 : 0.0)));
        }
      }
      EXPECT_LT(worst, 1e-5) << impl.name << " n=" << n;
    }
  }
}

// c += alpha a b (b: k rows of n) or, transposed, alpha a b^T (b: n rows of k), with strides,
// against float64; the padding columns of c must stay as they were.
void check_gemm(bool transposed, float alpha, uint64_t seed) {
  const int64_t m = 70, n = 300, k = 130, lda = k + 3, ldb = transposed ? k + 5 : n + 5, ldc = n + 7;
  const std::vector<double> a = random_values(static_cast<size_t>(m * lda), seed);
  const std::vector<double> b = random_values(static_cast<size_t>((transposed ? n : k) * ldb), seed + 1);
  const std::vector<double> c0 = random_values(static_cast<size_t>(m * ldc), seed + 2);
  for (const Impl& impl : implementations()) {
    const std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end());
    std::vector<float> c(c0.begin(), c0.end());
    (transposed ? impl.gemm_nt_add : impl.gemm_add)(m, n, k, alpha, af.data(), lda, bf.data(), ldb, c.data(), ldc);
    double worst = 0.0;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < ldc; ++j) {
        double want = double{static_cast<float>(c0[static_cast<size_t>(i * ldc + j)])};
        for (int64_t q = 0; j < n && q < k; ++q) {
          const size_t at = static_cast<size_t>(transposed ? j * ldb + q : q * ldb + j);
          want += double{alpha} * af[static_cast<size_t>(i * lda + q)] * bf[at];
        }
        worst = std::max(worst, std::abs(want - c[static_cast<size_t>(i * ldc + j)]));
      }
    }
    EXPECT_LT(worst, 1e-4) << impl.name << (transposed ? " (b transposed)" : "");
  }
}

TEST(DenseBlas, GemmAddWithStridesMatchesFloat64) {
  check_gemm(false, -0.5f, 3);
}

TEST(DenseBlas, GemmNtAddWithStridesMatchesFloat64) {
  check_gemm(true, 0.75f, 6);
}

TEST(DenseBlas, SyrkLowerAddAccumulatesTheGramMatrix) {
  const int64_t n = 200, rows = 90;
  const std::vector<double> x = random_values(static_cast<size_t>(rows * n), 6);
  for (const Impl& impl : implementations()) {
    std::vector<double> c(static_cast<size_t>(n * n), 1.0);
    impl.syrk_lower_add(c.data(), n, x.data(), rows);
    impl.syrk_lower_add(c.data(), n, x.data(), rows);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        if (j > i) {
          ASSERT_EQ(c[static_cast<size_t>(i * n + j)], 1.0) << impl.name;
          continue;
        }
        double want = 1.0;
        for (int64_t r = 0; r < rows; ++r)
          want += 2.0 * x[static_cast<size_t>(r * n + i)] * x[static_cast<size_t>(r * n + j)];
        ASSERT_NEAR(c[static_cast<size_t>(i * n + j)], want, 1e-9 * rows) << impl.name;
      }
    }
  }
}

}  // namespace
}  // namespace folio::quant::dense
