// The CPU backend's elementwise ops and matmul against float64 computations.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/elementwise_avx512.h"
#include "backend/cpu/quant/quant_kernels.h"
#include "quant/formats.h"

namespace folio::cpu {
namespace {

std::vector<float> random_vector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// 3 rows (on the calling thread) and 70 (split across the threads).
TEST(CpuOps, RmsNormMatchesFloat64) {
  CpuBackend backend(2);
  const int64_t dim = 576;
  for (int64_t rows : {3, 70}) {
    std::vector<float> x = random_vector(rows * dim, 1, 3.0f), w = random_vector(dim, 2);
    std::vector<float> out(x.size());
    backend.rms_norm(x.data(), w.data(), out.data(), rows, dim, 1e-5f);
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
      const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
      for (int64_t i = 0; i < dim; ++i) ASSERT_NEAR(out[r * dim + i], x[r * dim + i] * inv * w[i], 1e-5);
    }
  }
}

TEST(CpuOps, RopeBothLayoutsMatchFloat64) {
  CpuBackend backend(1);
  const int32_t heads = 3, head_dim = 16;
  const std::vector<int32_t> positions = {0, 1, 7, 4095};
  const std::vector<float> factors = {1, 1, 2, 4, 8, 8, 8, 8};
  for (RopeStyle style : {RopeStyle::kAdjacentPairs, RopeStyle::kHalves}) {
    for (const float* freq_factors : {static_cast<const float*>(nullptr), factors.data()}) {
      std::vector<float> x = random_vector(positions.size() * heads * head_dim, 3);
      const std::vector<float> original = x;
      RopeParams params{style, head_dim, 10000.0f, 0.5f, freq_factors};
      backend.rope(x.data(), positions, heads, head_dim, params);
      for (size_t t = 0; t < positions.size(); ++t) {
        for (int32_t h = 0; h < heads; ++h) {
          const size_t base = (t * heads + h) * head_dim;
          for (int32_t i = 0; i < head_dim / 2; ++i) {
            double inv_freq = std::pow(10000.0, -2.0 * i / head_dim);
            if (freq_factors) inv_freq /= freq_factors[i];
            const double theta = positions[t] * 0.5 * inv_freq;
            const int32_t a = style == RopeStyle::kAdjacentPairs ? 2 * i : i;
            const int32_t b = style == RopeStyle::kAdjacentPairs ? 2 * i + 1 : i + head_dim / 2;
            const double x0 = original[base + a], x1 = original[base + b];
            EXPECT_NEAR(x[base + a], x0 * std::cos(theta) - x1 * std::sin(theta), 2e-3);
            EXPECT_NEAR(x[base + b], x0 * std::sin(theta) + x1 * std::cos(theta), 2e-3);
          }
        }
      }
    }
  }
}

// SwiGLU on every path, 100 elements (one thread) and 50,000 (split), gates out to +-120 (exp
// past float's range both ways): within 2 ulp-ish of float64 (the vector exp is correctly
// rounded, the scalar one 0.502 ulp; a divide and two multiplies round too).
TEST(CpuOps, SwigluAndAdd) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!isa_supported(isa)) continue;
    CpuBackend backend(2, isa);
    for (int n : {100, 50000}) {
      std::vector<float> g = random_vector(n, 4, 4.0f), u = random_vector(n, 5), out(n);
      g[0] = 120.0f;
      g[1] = -120.0f;
      g[2] = 89.5f;
      g[3] = -89.5f;
      backend.swiglu(g.data(), u.data(), out.data(), n);
      for (int i = 0; i < n; ++i) {
        const double expected = g[i] / (1.0 + std::exp(-double(g[i]))) * u[i];
        ASSERT_NEAR(out[i], expected, 4e-7 * std::fabs(expected) + 1e-30) << isa_name(isa) << " gate " << g[i];
      }
    }
  }
  CpuBackend backend(1);
  std::vector<float> g = random_vector(100, 4, 4.0f), u = random_vector(100, 5);
  std::vector<float> x = g;
  backend.add(x.data(), u.data(), 100);
  for (int i = 0; i < 100; ++i) EXPECT_FLOAT_EQ(x[i], g[i] + u[i]);
}

// GeGLU (GELU's tanh form, Gemma's MLP) on every path, one thread and split, gates out to +-120:
// within a few ulp of float64's 0.5 g (1 + tanh(z)) u, negative gates too (every path computes
// g / (1 + exp(-2z)): 1 + tanh(z) in float cancels there, and moved Gemma 3's perplexity 0.4%).
TEST(CpuOps, GegluTanhMatchesFloat64) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!isa_supported(isa)) continue;
    CpuBackend backend(2, isa);
    for (int n : {100, 50000}) {
      std::vector<float> g = random_vector(n, 6, 4.0f), u = random_vector(n, 7), out(n);
      g[0] = 120.0f;
      g[1] = -120.0f;
      g[2] = 9.5f;
      g[3] = -9.5f;
      backend.geglu_tanh(g.data(), u.data(), out.data(), n);
      for (int i = 0; i < n; ++i) {
        const double x = g[i];
        // 0.5 x (1 + tanh(z)) in float64, written as x / (1 + exp(-2z)): double's 1 + tanh(z)
        // cancels too, to 0 for z below about -19.
        const double z = 0.7978845608028654 * (x + 0.044715 * x * x * x);
        const double expected = x / (1.0 + std::exp(-2.0 * z)) * u[i];
        // z rounds in float (a few ulp), and exp turns that into a relative error of |2z| ulp.
        const double relative = 1e-6 + 4e-7 * std::fabs(2.0 * z);
        ASSERT_NEAR(out[i], expected, relative * std::fabs(expected) + 1e-30) << isa_name(isa) << " gate " << g[i];
      }
    }
  }
}

// matmul over every weight type, n = 1 (decode) and n = 13 (prefill, not a multiple of the
// kernel's activation-row group), against a float64 product of the dequantized weights and the
// unconverted activations. The tolerance covers the activations' 8-bit conversion.
TEST(CpuOps, MatmulAllTypesMatchFloat64) {
  const DType types[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1,
                         DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K};
  const int64_t rows = 37, cols = 512;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!isa_supported(isa)) continue;
    CpuBackend backend(2, isa);
    for (DType type : types) {
      const QuantKernels* kernels = quant_kernels(type, isa);
      ASSERT_NE(kernels, nullptr) << dtype_name(type);
      const std::vector<float> w_float = random_vector(rows * cols, 6);
      std::vector<uint8_t> w_bytes(rows * row_bytes(type, cols));
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_TRUE(quant::quantize_row_reference(type, w_float.data() + r * cols,
                                                  w_bytes.data() + r * row_bytes(type, cols), cols));
      }
      WeightTensor w{type, rows, cols, w_bytes.data()};
      std::vector<float> w_deq(rows * cols);
      for (int64_t r = 0; r < rows; ++r) kernels->dequantize_row(w.row(r), w_deq.data() + r * cols, cols);
      for (int64_t n : {1, 13}) {
        const std::vector<float> x = random_vector(n * cols, 7);
        std::vector<float> y(n * rows, std::nanf(""));
        backend.matmul(w, x.data(), y.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          double norm = 0;
          for (int64_t k = 0; k < cols; ++k) norm += double(x[i * cols + k]) * x[i * cols + k];
          for (int64_t r = 0; r < rows; ++r) {
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < cols; ++k) {
              ref += double(w_deq[r * cols + k]) * x[i * cols + k];
              mag += std::fabs(double(w_deq[r * cols + k]) * x[i * cols + k]);
            }
            const bool float_acts = kernels->activation_type == DType::F32;
            const double tolerance = float_acts ? 1e-4 * mag + 1e-4 : 0.02 * mag + 1e-3;
            ASSERT_NEAR(y[i * rows + r], ref, tolerance)
                << dtype_name(type) << " " << isa_name(isa) << " n=" << n << " row " << r;
          }
        }
      }
    }
  }
}

// One call over matrices of types that read the same activation format (Q8_0) but differ in
// their terms: Q6_K's 16-input blocks beside Q4_K's 32, Q5_0's and Q8_0's offsets (a Q4_K_M
// file's layers mix them: Q5_0 Q and K with a Q8_0 V): each matrix's rows have the bits of the
// matrix computed alone, at decode and prefill sizes, on every panel path.
TEST(CpuOps, SharedInputMatmulMixesPanelTypes) {
  const int64_t cols = 512;
  constexpr int kMatrices = 5;
  const DType types[kMatrices] = {DType::Q4_K, DType::Q6_K, DType::Q4_K, DType::Q5_0, DType::Q8_0};
  const int64_t rows[kMatrices] = {32, 48, 16, 16, 32};
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kAmx}) {
    if (!isa_supported(isa)) continue;
    CpuBackend backend(2, isa);
    std::vector<std::vector<uint8_t>> bytes(kMatrices);
    std::vector<WeightTensor> ws(kMatrices);
    std::vector<AlignedBytes> packed;
    for (int i = 0; i < kMatrices; ++i) {
      const std::vector<float> w = random_vector(rows[i] * cols, 20 + i);
      const size_t rb = row_bytes(types[i], cols);
      bytes[static_cast<size_t>(i)].resize(static_cast<size_t>(rows[i]) * rb);
      for (int64_t r = 0; r < rows[i]; ++r) {
        ASSERT_TRUE(quant::quantize_row_reference(types[i], w.data() + r * cols,
                                                  bytes[static_cast<size_t>(i)].data() + r * rb, cols));
      }
      ws[static_cast<size_t>(i)] = WeightTensor{types[i], rows[i], cols, bytes[static_cast<size_t>(i)].data()};
      packed.push_back(backend.pack_for_matmul(ws[static_cast<size_t>(i)]));
      ASSERT_FALSE(packed.back().empty()) << dtype_name(types[i]) << " " << isa_name(isa) << ": not on the panels";
      ws[static_cast<size_t>(i)].packed = packed.back().data();
    }
    for (int64_t n : {1, 19, 40}) {
      const std::vector<float> x = random_vector(n * cols, 30);
      std::vector<std::vector<float>> together(kMatrices), alone(kMatrices);
      std::vector<const WeightTensor*> pointers;
      std::vector<float*> outs;
      for (int i = 0; i < kMatrices; ++i) {
        together[static_cast<size_t>(i)].assign(static_cast<size_t>(n * rows[i]), std::nanf(""));
        alone[static_cast<size_t>(i)].assign(static_cast<size_t>(n * rows[i]), std::nanf(""));
        pointers.push_back(&ws[static_cast<size_t>(i)]);
        outs.push_back(together[static_cast<size_t>(i)].data());
        backend.matmul(ws[static_cast<size_t>(i)], x.data(), alone[static_cast<size_t>(i)].data(), n);
      }
      backend.matmul_shared_input(pointers, x.data(), outs, n);
      for (int i = 0; i < kMatrices; ++i) {
        ASSERT_EQ(std::memcmp(together[static_cast<size_t>(i)].data(), alone[static_cast<size_t>(i)].data(),
                              together[static_cast<size_t>(i)].size() * sizeof(float)),
                  0)
            << dtype_name(types[i]) << " " << isa_name(isa) << " n=" << n;
      }
    }
  }
}

// The AVX-512 softmax exp, on every 61st float in [-104, 0] and the ends: correctly rounded
// (float of the float64 exp) but for at most one in a million, and never more than one ulp
// from glibc's expf.
TEST(CpuOps, VectorExpIsCorrectlyRounded) {
  if (!isa_supported(Isa::kAvx512)) GTEST_SKIP() << "skipped: no AVX-512";
  std::vector<float> x;
  const float lowest = -104.0f;
  uint32_t last;
  std::memcpy(&last, &lowest, sizeof last);
  for (uint32_t bits = 0x80000000u; bits <= last; bits += 61) {  // negative floats grow in magnitude
    float v;
    std::memcpy(&v, &bits, sizeof v);
    x.push_back(v);
  }
  x.push_back(lowest);
  x.push_back(-200.0f);
  x.push_back(-INFINITY);
  std::vector<float> y(x.size());
  exp_avx512_array(x.data(), y.data(), static_cast<int64_t>(x.size()));
  size_t not_rounded = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float exact = static_cast<float>(std::exp(static_cast<double>(x[i])));
    not_rounded += y[i] != exact;
    int32_t a, b;
    const float libm = std::exp(x[i]);
    std::memcpy(&a, &y[i], 4);
    std::memcpy(&b, &libm, 4);
    ASSERT_LE(std::abs(a - b), 1) << "exp(" << x[i] << ") = " << y[i] << ", expf " << libm;
  }
  std::printf("%zu floats, %zu not correctly rounded\n", x.size(), not_rounded);
  EXPECT_LE(not_rounded, x.size() / 1000000 + 1);
}

// The fast exp (activations) on every 61st float in [-104, 88]: within 2 ulp of float64's.
TEST(CpuOps, FastVectorExpIsWithinTwoUlp) {
  if (!isa_supported(Isa::kAvx512)) GTEST_SKIP() << "skipped: no AVX-512";
  std::vector<float> x;
  for (uint32_t bits = 0; bits <= 0x42B00000u; bits += 61) {  // 0 .. 88, both signs (-104 .. 0 too)
    float v;
    std::memcpy(&v, &bits, sizeof v);
    x.push_back(v);
    if (v <= 104.0f) x.push_back(-v);
  }
  std::vector<float> y(x.size());
  exp_fast_avx512_array(x.data(), y.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const float exact = static_cast<float>(std::exp(static_cast<double>(x[i])));
    if (exact < 1e-37f) continue;  // subnormal results: scalef's rounding there is not the point
    int32_t a, b;
    std::memcpy(&a, &y[i], 4);
    std::memcpy(&b, &exact, 4);
    ASSERT_LE(std::abs(a - b), 2) << "exp(" << x[i] << ") = " << y[i] << ", float64 " << exact;
  }
}

}  // namespace
}  // namespace folio::cpu
