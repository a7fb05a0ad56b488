// quant/awq.h: on inputs with a few large channels (what AWQ exploits), the searched scales put
// more of the grid on the columns that meet them and cut the output error below round to
// nearest's, measured here in float64 from the activations themselves (not from the Gram matrix
// the search used); and the scaled, quantized, unscaled matrix is what the error says it is.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "quant/awq.h"

namespace folio::quant {
namespace {

TEST(Awq, ScalesCutTheOutputErrorOnOutlierChannels) {
  const int64_t rows = 48, cols = 128, tokens = 256;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(tokens * cols));
  for (float& v : w) v = 0.05f * normal(rng);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t c = 0; c < cols; ++c)
      x[static_cast<size_t>(t * cols + c)] = normal(rng) * (c % 16 == 5 ? 20.0f : 1.0f);
  }
  std::vector<double> gram(static_cast<size_t>(cols * cols), 0.0);
  std::vector<float> rms(static_cast<size_t>(cols), 0.0f);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t i = 0; i < cols; ++i) {
      const double xi = x[static_cast<size_t>(t * cols + i)];
      rms[static_cast<size_t>(i)] += static_cast<float>(xi * xi / tokens);
      for (int64_t j = 0; j <= i; ++j)
        gram[static_cast<size_t>(i * cols + j)] += xi * x[static_cast<size_t>(t * cols + j)];
    }
  }
  for (float& r : rms) r = std::sqrt(r);
  const Int4Options options{.group_size = 32};
  const AwqMatrix m{w.data(), rows};
  const AwqScales s = awq_search_scales({&m, 1}, cols, rms, gram.data(), options);
  EXPECT_GT(s.alpha, 0.0);
  EXPECT_LT(s.error, 0.8 * s.error_unscaled);
  EXPECT_GT(s.s[5], s.s[6]) << "an outlier channel gets the larger scale";

  // The error the search reports, recomputed from X in float64: W - Q(W s) / s.
  auto output_error = [&](const std::vector<float>& scale) {
    std::vector<float> scaled(w.size());
    for (size_t i = 0; i < w.size(); ++i) scaled[i] = w[i] * scale[i % static_cast<size_t>(cols)];
    const std::vector<float> q = quantize_int4_rtn(scaled.data(), rows, cols, options).dequantize();
    double total = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t t = 0; t < tokens; ++t) {
        double acc = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
          const size_t i = static_cast<size_t>(r * cols + c);
          acc +=
              (w[i] - static_cast<double>(q[i]) / scale[static_cast<size_t>(c)]) * x[static_cast<size_t>(t * cols + c)];
        }
        total += acc * acc;
      }
    }
    return total;
  };
  const double scaled = output_error(s.s), plain = output_error(std::vector<float>(static_cast<size_t>(cols), 1.0f));
  std::printf("  output error: AWQ %.4g, round to nearest %.4g (%.3f), alpha %.2f\n", scaled, plain, scaled / plain,
              s.alpha);
  EXPECT_LT(scaled, 0.8 * plain);
  EXPECT_NEAR(scaled / plain, s.error / s.error_unscaled, 0.02);
}

}  // namespace
}  // namespace folio::quant
