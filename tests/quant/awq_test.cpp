// quant/awq.h: on inputs with a few large channels (what AWQ exploits), the searched scales put
// more of the grid on the columns that meet them and cut the output error below round to
// nearest's, measured here in float64 from the activations themselves (not from the Gram matrix
// the search used); and the scaled, quantized, unscaled matrix is what the error says it is.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "quant/awq.h"

namespace folio::quant {
namespace {

// ||(W - Q / s) X^T||^2 in float64 from the activations x (tokens, cols): q the rounded scaled
// weights (rows, cols), s the scales they were made with.
double output_error(const std::vector<float>& w, const std::vector<float>& q, const std::vector<float>& s,
                    const std::vector<float>& x, int64_t rows, int64_t cols, int64_t tokens) {
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t t = 0; t < tokens; ++t) {
      double acc = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        const size_t i = static_cast<size_t>(r * cols + c);
        acc += (w[i] - static_cast<double>(q[i]) / s[static_cast<size_t>(c)]) * x[static_cast<size_t>(t * cols + c)];
      }
      total += acc * acc;
    }
  }
  return total;
}

// sum x x^T (lower triangle) and the RMS per channel of inputs x (tokens, cols).
struct InputStats {
  std::vector<double> gram;
  std::vector<float> rms;
};
InputStats input_stats(const std::vector<float>& x, int64_t cols, int64_t tokens) {
  InputStats st{std::vector<double>(static_cast<size_t>(cols * cols), 0.0),
                std::vector<float>(static_cast<size_t>(cols), 0.0f)};
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t i = 0; i < cols; ++i) {
      const double xi = x[static_cast<size_t>(t * cols + i)];
      st.rms[static_cast<size_t>(i)] += static_cast<float>(xi * xi / tokens);
      for (int64_t j = 0; j <= i; ++j)
        st.gram[static_cast<size_t>(i * cols + j)] += xi * x[static_cast<size_t>(t * cols + j)];
    }
  }
  for (float& r : st.rms) r = std::sqrt(r);
  return st;
}

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
  const auto [gram, rms] = input_stats(x, cols, tokens);
  const Int4Options options{.group_size = 32};
  const AwqMatrix m{w.data(), rows};
  const AwqScales s = awq_search_scales({&m, 1}, cols, rms, gram.data(), options);
  EXPECT_GT(s.alpha, 0.0);
  EXPECT_LT(s.error, 0.8 * s.error_unscaled);
  EXPECT_GT(s.s[5], s.s[6]) << "an outlier channel gets the larger scale";

  // The error the search reports, recomputed from X in float64: W - Q(W s) / s.
  auto error_at = [&](const std::vector<float>& scale) {
    std::vector<float> scaled(w.size());
    for (size_t i = 0; i < w.size(); ++i) scaled[i] = w[i] * scale[i % static_cast<size_t>(cols)];
    const std::vector<float> q = quantize_int4_rtn(scaled.data(), rows, cols, options).dequantize();
    return output_error(w, q, scale, x, rows, cols, tokens);
  };
  const double scaled = error_at(s.s), plain = error_at(std::vector<float>(static_cast<size_t>(cols), 1.0f));
  std::printf("  output error: AWQ %.4g, round to nearest %.4g (%.3f), alpha %.2f\n", scaled, plain, scaled / plain,
              s.alpha);
  EXPECT_LT(scaled, 0.8 * plain);
  EXPECT_NEAR(scaled / plain, s.error / s.error_unscaled, 0.02);
}

// With fewer calibration tokens than input columns the search reads the inputs themselves
// (||D X^T||^2, the cheaper product): it must make the same choice as the Gram matrix path and
// report the same errors within float rounding.
TEST(Awq, SearchFromInputsEqualsTheGramPath) {
  const int64_t rows = 40, cols = 256, tokens = 96;
  std::mt19937 rng(23);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(tokens * cols));
  for (float& v : w) v = 0.05f * normal(rng);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t c = 0; c < cols; ++c)
      x[static_cast<size_t>(t * cols + c)] = normal(rng) * (c % 32 == 3 ? 15.0f : 1.0f + static_cast<float>(c % 5));
  }
  const auto [gram, rms] = input_stats(x, cols, tokens);
  const Int4Options options{.group_size = 32};
  const AwqMatrix m{w.data(), rows};
  const AwqScales from_gram = awq_search_scales({&m, 1}, cols, rms, gram.data(), options);
  const AwqScales from_inputs = awq_search_scales({&m, 1}, cols, rms, gram.data(), options, x);
  EXPECT_EQ(from_inputs.alpha, from_gram.alpha);
  EXPECT_EQ(from_inputs.s, from_gram.s);
  EXPECT_NEAR(from_inputs.error / from_gram.error, 1.0, 1e-4);
  EXPECT_NEAR(from_inputs.error_unscaled / from_gram.error_unscaled, 1.0, 1e-4);
  EXPECT_LT(from_inputs.error, from_inputs.error_unscaled);
}

// The error the search reports from the inputs (D's rows a chunk at a time, X D^T from D's rows)
// equals the one recomputed here in float64 with quantize_int4_rtn and Int4Matrix::dequantize,
// for a matrix of more rows than a chunk and two matrices reading one input.
TEST(Awq, SearchErrorFromInputsEqualsFloat64OfTheRoundedMatrix) {
  const int64_t rows = 300, rows2 = 20, cols = 128, tokens = 64;
  std::mt19937 rng(31);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(rows * cols)), w2(static_cast<size_t>(rows2 * cols));
  std::vector<float> x(static_cast<size_t>(tokens * cols));
  for (float& v : w) v = 0.05f * normal(rng);
  for (float& v : w2) v = 0.03f * normal(rng);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t c = 0; c < cols; ++c)
      x[static_cast<size_t>(t * cols + c)] = normal(rng) * (c % 16 == 5 ? 12.0f : 1.0f + static_cast<float>(c % 3));
  }
  const auto [gram, rms] = input_stats(x, cols, tokens);
  const Int4Options options{.group_size = 32};
  const AwqMatrix matrices[2] = {{w.data(), rows}, {w2.data(), rows2}};
  const AwqScales found = awq_search_scales(matrices, cols, rms, gram.data(), options, x);
  double norm = 0.0;
  for (int64_t i = 0; i < cols; ++i) norm = std::max(norm, gram[static_cast<size_t>(i * cols + i)]);
  auto error_of = [&](const std::vector<float>& s) {
    double total = 0.0;
    for (const auto& [mw, mr] : {std::pair{&w, rows}, std::pair{&w2, rows2}}) {
      std::vector<float> scaled(mw->size());
      for (size_t i = 0; i < scaled.size(); ++i) scaled[i] = (*mw)[i] * s[i % static_cast<size_t>(cols)];
      const std::vector<float> q = quantize_int4_rtn(scaled.data(), mr, cols, options).dequantize();
      total += output_error(*mw, q, s, x, mr, cols, tokens);
    }
    return total / norm;
  };
  EXPECT_NEAR(found.error / error_of(found.s), 1.0, 1e-4);
  EXPECT_NEAR(found.error_unscaled / error_of(std::vector<float>(static_cast<size_t>(cols), 1.0f)), 1.0, 1e-4);
  EXPECT_GT(found.alpha, 0.0);  // the outlier channels make scaling pay
}

// The clipping search on heavy-tailed weights (Student's t, 3 degrees of freedom: a few large
// weights per group stretch the grid for the rest): it never raises the error it minimizes, it
// clips some groups, and the output error recomputed from X in float64 for the clamped weights
// falls by the ratio it reports. Clamped groups stay within their original range.
TEST(Awq, ClipSearchLowersTheOutputErrorOnHeavyTails) {
  const int64_t rows = 32, cols = 128, tokens = 256;
  std::mt19937 rng(5);
  std::student_t_distribution<float> heavy(3.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(tokens * cols));
  for (float& v : w) v = 0.02f * heavy(rng);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t c = 0; c < cols; ++c)
      x[static_cast<size_t>(t * cols + c)] = normal(rng) * (1.0f + static_cast<float>(c % 7));
  }
  std::vector<double> gram(static_cast<size_t>(cols * cols), 0.0);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t i = 0; i < cols; ++i) {
      const double xi = x[static_cast<size_t>(t * cols + i)];
      for (int64_t j = 0; j <= i; ++j)
        gram[static_cast<size_t>(i * cols + j)] += xi * x[static_cast<size_t>(t * cols + j)];
    }
  }
  // Scales of 2 on every other channel: the search sees the scaled input x / s.
  std::vector<float> s(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) s[static_cast<size_t>(c)] = c % 2 == 0 ? 2.0f : 1.0f;
  std::vector<float> scaled(w.size());
  for (size_t i = 0; i < w.size(); ++i) scaled[i] = w[i] * s[i % static_cast<size_t>(cols)];
  const std::vector<float> before = scaled;
  const Int4Options options{.group_size = 32};
  const AwqClip clip = awq_clip(scaled.data(), rows, cols, s, gram.data(), options);
  EXPECT_EQ(clip.groups, rows * cols / 32);
  EXPECT_GT(clip.clipped, 0);
  EXPECT_LE(clip.error, clip.error_unclipped);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols / 32; ++b) {
      float amax = 0.0f;
      for (int64_t i = 0; i < 32; ++i)
        amax = std::max(amax, std::fabs(before[static_cast<size_t>(r * cols + b * 32 + i)]));
      for (int64_t i = 0; i < 32; ++i) {
        const size_t at = static_cast<size_t>(r * cols + b * 32 + i);
        ASSERT_LE(std::fabs(scaled[at]), amax * (1.0f + 1e-6f));
        // A weight moves only by being clamped: toward zero, never across it.
        ASSERT_TRUE(scaled[at] == before[at] || std::fabs(scaled[at]) < std::fabs(before[at])) << at;
      }
    }
  }
  // ||(W - Q(clamped W s) / s) X^T||^2 from the activations, against the unclamped rounding.
  auto error_of = [&](const std::vector<float>& weights) {
    return output_error(w, quantize_int4_rtn(weights.data(), rows, cols, options).dequantize(), s, x, rows, cols,
                        tokens);
  };
  const double clipped = error_of(scaled), plain = error_of(before);
  std::printf("  clipped %lld of %lld groups; output error %.4g against %.4g unclipped (%.3f, search said %.3f)\n",
              static_cast<long long>(clip.clipped), static_cast<long long>(clip.groups), clipped, plain,
              clipped / plain, clip.error / clip.error_unclipped);
  EXPECT_LT(clipped, 0.97 * plain);
  // The search sums each group's own block of the Gram matrix (groups are chosen one at a
  // time, as AutoAWQ does); the terms between groups, zero in expectation for these
  // independent channels, are sampling noise at 256 tokens.
  EXPECT_NEAR(clipped / plain, clip.error / clip.error_unclipped, 0.05);
}

}  // namespace
}  // namespace folio::quant
