// The searching quantizer (quant/quantize_search.h) against the reference one: on rows
// shaped like trained weights (Gaussian, with rare outliers) its dequantized rows must be closer
// to the source, in plain squared error, for every K-quant type, and its blocks must decode with
// the reference dequantizer (same layout).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "quant/formats.h"
#include "quant/quantize_search.h"

namespace folio::quant {
namespace {

std::vector<float> weight_like_row(std::mt19937& rng, int64_t n) {
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(n));
  for (float& x : row) x = normal(rng) * (uniform(rng) < 0.01f ? 8.0f : 1.0f);
  return row;
}

double squared_error(DType type, const std::vector<float>& x, bool searched, const float* importance = nullptr) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> blocks(row_bytes(type, n));
  if (searched) {
    EXPECT_TRUE(quantize_row_searched(type, x.data(), blocks.data(), n, importance));
  } else {
    EXPECT_TRUE(quantize_row_reference(type, x.data(), blocks.data(), n));
  }
  std::vector<float> back(x.size());
  EXPECT_TRUE(dequantize_row(type, blocks.data(), back.data(), n));
  double e = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = static_cast<double>(back[i]) - x[i];
    e += (importance != nullptr ? importance[i] : 1.0) * d * d;
  }
  return e;
}

class QuantizeSearchTest : public ::testing::TestWithParam<DType> {};

bool is_k_quant(DType t) {
  return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K;
}

// With uniform importance the search minimizes the plain squared error (the 32-element types
// search only when given an importance: without one they round as the reference does).
TEST_P(QuantizeSearchTest, CloserThanMinMaxOnWeightLikeRows) {
  std::mt19937 rng(5);
  const std::vector<float> uniform(4096, 1.0f);
  double searched = 0.0, reference = 0.0;
  for (int r = 0; r < 64; ++r) {
    const std::vector<float> row = weight_like_row(rng, 4096);
    searched += squared_error(GetParam(), row, true, uniform.data());
    reference += squared_error(GetParam(), row, false);
  }
  const double ratio = searched / reference;
  RecordProperty("error_ratio", std::to_string(ratio));
  std::printf("%s: searched / min-max squared error %.3f\n", std::string(dtype_name(GetParam())).c_str(), ratio);
  EXPECT_LT(ratio, 0.98);
}

TEST_P(QuantizeSearchTest, WithoutImportanceThe32ElementTypesRoundAsTheReference) {
  if (is_k_quant(GetParam())) GTEST_SKIP() << "the K-quants always search";
  std::mt19937 rng(3);
  const std::vector<float> row = weight_like_row(rng, 4096);
  std::vector<uint8_t> a(row_bytes(GetParam(), 4096)), b(a.size());
  ASSERT_TRUE(quantize_row_searched(GetParam(), row.data(), a.data(), 4096));
  ASSERT_TRUE(quantize_row_reference(GetParam(), row.data(), b.data(), 4096));
  EXPECT_EQ(a, b);
}

TEST_P(QuantizeSearchTest, ImportanceMovesTheErrorOffImportantFeatures) {
  std::mt19937 rng(9);
  std::vector<float> importance(4096, 1.0f);
  for (size_t i = 0; i < importance.size(); i += 7) importance[i] = 50.0f;  // a few hot input features
  double with = 0.0, without = 0.0;
  for (int r = 0; r < 32; ++r) {
    const std::vector<float> row = weight_like_row(rng, 4096);
    with += squared_error(GetParam(), row, true, importance.data());
    // The error weighted by importance of the blocks made without it.
    std::vector<uint8_t> blocks(row_bytes(GetParam(), 4096));
    ASSERT_TRUE(quantize_row_searched(GetParam(), row.data(), blocks.data(), 4096));
    std::vector<float> back(4096);
    ASSERT_TRUE(dequantize_row(GetParam(), blocks.data(), back.data(), 4096));
    for (size_t i = 0; i < row.size(); ++i) without += importance[i] * (back[i] - row[i]) * (back[i] - row[i]);
  }
  EXPECT_LT(with, without);
}

INSTANTIATE_TEST_SUITE_P(BlockTypes, QuantizeSearchTest,
                         ::testing::Values(DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                                           DType::Q5_1),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace folio::quant
