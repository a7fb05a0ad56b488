// The GPU's 8-bit layout against the GGUF reference dequantizers: repacking a row of any 4- to
// 8-bit GGUF type keeps every code, and the weights the kernels compute with are the file's
// within the BF16 rounding of scale and min (plus the one rounding of the weight).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/fp16.h"
#include "quant/block_formats.h"
#include "quant/formats.h"
#include "quant/int8_groups.h"
#include "quant_test_util.h"

namespace folio::quant {
namespace {

std::vector<uint8_t> random_row(DType type, int64_t cols, uint32_t seed) {
  return cpu::test::normal_row_with_outliers(type, cols, seed, {{3, 0.2f}, {300, -0.3f}});
}

float scale_of(uint32_t group) {
  return bf16_to_fp32(static_cast<uint16_t>(group & 0xffff));
}
float min_of(uint32_t group) {
  return bf16_to_fp32(static_cast<uint16_t>(group >> 16));
}

struct Case {
  DType type;
  int64_t group_cols;
};

class Int8Groups : public ::testing::TestWithParam<Case> {};

TEST_P(Int8Groups, RepackedWeightsAreTheFilesWithinBf16Rounding) {
  const auto [type, group_cols] = GetParam();
  ASSERT_TRUE(int8_repackable(type));
  ASSERT_LE(group_cols, int8_group_cols(type));
  constexpr int64_t kCols = 512;
  const std::vector<uint8_t> row = random_row(type, kCols, 11);
  std::vector<float> reference(kCols);
  ASSERT_TRUE(dequantize_row(type, row.data(), reference.data(), kCols));

  std::vector<uint8_t> codes(kCols);
  std::vector<uint32_t> groups(static_cast<size_t>(kCols / group_cols));
  repack_int8_row(type, row.data(), kCols, group_cols, codes.data(), groups.data());
  std::vector<float> repacked(kCols);
  dequantize_int8_row(codes.data(), groups.data(), kCols, group_cols, repacked.data());

  int64_t distinct_scales = 0;
  for (int64_t c = 0; c < kCols; ++c) {
    const uint32_t group = groups[static_cast<size_t>(c / group_cols)];
    const float scale = scale_of(group), min = min_of(group);
    // Scale and min each within 2^-8 relative (BF16: 8 significant bits), one more rounding of
    // the weight.
    const float q = static_cast<float>(codes[c]);
    const float bound = (q * std::fabs(scale) + std::fabs(min)) * 0x1p-8f + std::fabs(reference[c]) * 0x1p-8f + 1e-12f;
    ASSERT_NEAR(repacked[c], reference[c], bound) << dtype_name(type) << " column " << c;
    // Every weight is exactly the kernels' formula on the stored fields.
    ASSERT_EQ(repacked[c], bf16_to_fp32(fp32_to_bf16(std::fmaf(q, scale, min)))) << c;
    if (c > 0 && c % group_cols == 0) distinct_scales += groups[c / group_cols] != groups[c / group_cols - 1];
  }
  EXPECT_GT(distinct_scales, 0) << "every group the same: the test data does not exercise the groups";
}

// The codes are the file's own: Q8_0's stored int8 plus 128, Q6_K's 6-bit values.
TEST(Int8GroupsLayout, CodesAreTheFilesValues) {
  constexpr int64_t kCols = 256;
  {
    const std::vector<uint8_t> row = random_row(DType::Q8_0, kCols, 3);
    std::vector<uint8_t> codes(kCols);
    std::vector<uint32_t> groups(kCols / 32);
    repack_int8_row(DType::Q8_0, row.data(), kCols, 32, codes.data(), groups.data());
    const auto* blocks = reinterpret_cast<const BlockQ8_0*>(row.data());
    for (int64_t c = 0; c < kCols; ++c) ASSERT_EQ(codes[c], blocks[c / 32].qs[c % 32] + 128) << c;
    for (int64_t g = 0; g < kCols / 32; ++g) {
      EXPECT_EQ(min_of(groups[g]), -128.0f * scale_of(groups[g]));
      EXPECT_EQ(scale_of(groups[g]), bf16_to_fp32(fp32_to_bf16(fp16_to_fp32(blocks[g].d))));
    }
  }
  {
    const std::vector<uint8_t> row = random_row(DType::Q6_K, kCols, 5);
    std::vector<uint8_t> codes(kCols);
    std::vector<uint32_t> groups(kCols / 16);
    repack_int8_row(DType::Q6_K, row.data(), kCols, 16, codes.data(), groups.data());
    int8_t q[kCols];
    const auto& block = *reinterpret_cast<const BlockQ6_K*>(row.data());
    unpack_q6k(block, q);
    for (int64_t c = 0; c < kCols; ++c) ASSERT_EQ(codes[c], q[c] + 32) << c;
    for (int64_t g = 0; g < 16; ++g) {
      const float scale = fp16_to_fp32(block.d) * static_cast<float>(block.scales[g]);
      EXPECT_EQ(scale_of(groups[g]), bf16_to_fp32(fp32_to_bf16(scale))) << g;
    }
  }
  EXPECT_EQ(int8_group_cols(DType::Q6_K), 16);
  EXPECT_EQ(int8_group_cols(DType::Q8_0), 32);
  EXPECT_FALSE(int8_repackable(DType::F16));
  EXPECT_FALSE(int8_repackable(DType::BF16));
}

INSTANTIATE_TEST_SUITE_P(Types, Int8Groups,
                         ::testing::Values(Case{DType::Q8_0, 32}, Case{DType::Q8_0, 16}, Case{DType::Q5_0, 32},
                                           Case{DType::Q5_1, 32}, Case{DType::Q5_K, 32}, Case{DType::Q5_K, 16},
                                           Case{DType::Q6_K, 16}, Case{DType::Q4_0, 32}, Case{DType::Q4_1, 16},
                                           Case{DType::Q4_K, 32}, Case{DType::Q4_K, 16}),
                         [](const auto& info) {
                           return std::string(dtype_name(info.param.type)) + "_g" +
                                  std::to_string(info.param.group_cols);
                         });

}  // namespace
}  // namespace folio::quant
