// The GPU's 4-bit layout against the GGUF reference dequantizers: repacking a Q4_0 / Q4_1 /
// Q4_K row keeps every code, and the weights the kernels compute with are the file's within
// the BF16 rounding of scale and min (plus the one rounding of the weight).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/fp16.h"
#include "quant/block_formats.h"
#include "quant/formats.h"
#include "quant/int4_groups.h"
#include "quant_test_util.h"

namespace folio::quant {
namespace {

std::vector<uint8_t> random_row(DType type, int64_t cols, uint32_t seed) {
  return cpu::test::normal_row_with_outliers(type, cols, seed, {{3, 0.2f}});
}

class Int4Groups : public ::testing::TestWithParam<DType> {};

TEST_P(Int4Groups, RepackedWeightsAreTheFilesWithinBf16Rounding) {
  const DType type = GetParam();
  constexpr int64_t kCols = 512;
  const std::vector<uint8_t> row = random_row(type, kCols, 7);
  std::vector<float> reference(kCols);
  ASSERT_TRUE(dequantize_row(type, row.data(), reference.data(), kCols));

  std::vector<uint8_t> codes(kCols / 2);
  std::vector<uint32_t> groups(kCols / kInt4Group);
  repack_int4_row(type, row.data(), kCols, codes.data(), groups.data());
  std::vector<float> repacked(kCols);
  dequantize_int4_row(codes.data(), groups.data(), kCols, repacked.data());

  for (int64_t g = 0; g < kCols / kInt4Group; ++g) {
    const float scale = bf16_to_fp32(static_cast<uint16_t>(groups[g] & 0xffff));
    const float min = bf16_to_fp32(static_cast<uint16_t>(groups[g] >> 16));
    for (int64_t c = g * kInt4Group; c < (g + 1) * kInt4Group; ++c) {
      // scale and min each within 2^-8 relative (BF16), q <= 15, one more rounding of the sum.
      const float bound = (15.0f * std::fabs(scale) + std::fabs(min)) * 0.0079f + std::fabs(repacked[c]) * 0.0040f;
      ASSERT_NEAR(repacked[c], reference[c], bound) << dtype_name(type) << " column " << c;
    }
  }
  // Exact when scale and min are already BF16 values: re-encoding the repacked weights from
  // their codes gives back the same codes.
  std::vector<uint8_t> q(kCols);
  for (int64_t c = 0; c < kCols; c += 8) {
    uint32_t word = 0;
    std::memcpy(&word, codes.data() + c / 2, 4);
    for (int j = 0; j < 4; ++j) {
      q[c + 2 * j] = (word >> (4 * j)) & 0xf;
      q[c + 2 * j + 1] = (word >> (16 + 4 * j)) & 0xf;
    }
  }
  std::vector<float> scales(kCols / kInt4Group), mins(kCols / kInt4Group);
  for (size_t g = 0; g < scales.size(); ++g) {
    scales[g] = bf16_to_fp32(static_cast<uint16_t>(groups[g] & 0xffff));
    mins[g] = bf16_to_fp32(static_cast<uint16_t>(groups[g] >> 16));
  }
  std::vector<uint8_t> codes2(kCols / 2);
  std::vector<uint32_t> groups2(kCols / kInt4Group);
  pack_int4_row(q.data(), scales.data(), mins.data(), kCols, codes2.data(), groups2.data());
  EXPECT_EQ(codes, codes2);
  EXPECT_EQ(groups, groups2);
}

// The codes are the file's own: with scale 1 and min 0 the layout holds the raw 4-bit values
// in the order the kernels read (column c + 2j in bits 4j, c + 2j + 1 in bits 16 + 4j).
TEST(Int4GroupsLayout, CodesSitWhereTheKernelsReadThem) {
  std::vector<uint8_t> q(64);
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<uint8_t>((i * 7 + 3) % 16);
  const std::vector<float> scales(2, 1.0f), mins(2, 0.0f);
  std::vector<uint8_t> codes(32);
  std::vector<uint32_t> groups(2);
  pack_int4_row(q.data(), scales.data(), mins.data(), 64, codes.data(), groups.data());
  uint32_t word1;
  std::memcpy(&word1, codes.data() + 4, 4);  // columns 8..15
  EXPECT_EQ(word1 & 0xf, q[8]);
  EXPECT_EQ((word1 >> 16) & 0xf, q[9]);
  EXPECT_EQ((word1 >> 12) & 0xf, q[14]);
  EXPECT_EQ((word1 >> 28) & 0xf, q[15]);
  std::vector<float> out(64);
  dequantize_int4_row(codes.data(), groups.data(), 64, out.data());
  for (size_t i = 0; i < q.size(); ++i) EXPECT_EQ(out[i], static_cast<float>(q[i])) << i;
  EXPECT_FALSE(int4_repackable(DType::Q6_K));
  EXPECT_FALSE(int4_repackable(DType::Q8_0));
}

// A Q4_1 row whose 32-column blocks share (d, m) over each group of group_cols columns (what an
// AWQ / GPTQ checkpoint of that group size becomes, hf_quantization.h).
std::vector<BlockQ4_1> grouped_q4_1_row(int64_t cols, int64_t group_cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> nibble(0, 15);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<BlockQ4_1> blocks(static_cast<size_t>(cols / 32));
  for (size_t b = 0; b < blocks.size(); ++b) {
    if (b % static_cast<size_t>(group_cols / 32) == 0) {
      blocks[b].d = fp32_to_fp16(0.01f + 0.01f * std::fabs(dist(rng)));
      blocks[b].m = fp32_to_fp16(-0.08f + 0.01f * dist(rng));
    } else {
      blocks[b].d = blocks[b - 1].d;
      blocks[b].m = blocks[b - 1].m;
    }
    for (uint8_t& v : blocks[b].qs) v = static_cast<uint8_t>(nibble(rng) | (nibble(rng) << 4));
  }
  return blocks;
}

// Wider groups keep one word a group and the very weights of the 32-column layout.
TEST(Int4GroupsLayout, CheckpointGroupsKeepOneWordAGroupAndTheSameWeights) {
  constexpr int64_t kCols = 1024;
  for (int64_t group_cols : {64, 128, 512, 1024}) {
    const std::vector<BlockQ4_1> row = grouped_q4_1_row(kCols, group_cols, static_cast<uint32_t>(group_cols));
    std::vector<uint8_t> codes32(kCols / 2), codes(kCols / 2);
    std::vector<uint32_t> groups32(kCols / 32), groups(static_cast<size_t>(kCols / group_cols));
    ASSERT_TRUE(repack_int4_row(DType::Q4_1, row.data(), kCols, codes32.data(), groups32.data()));
    ASSERT_TRUE(repack_int4_row(DType::Q4_1, row.data(), kCols, codes.data(), groups.data(), group_cols)) << group_cols;
    EXPECT_EQ(codes, codes32);
    for (size_t g = 0; g < groups.size(); ++g) EXPECT_EQ(groups[g], groups32[g * static_cast<size_t>(group_cols / 32)]);
    std::vector<float> out32(kCols), out(kCols);
    dequantize_int4_row(codes32.data(), groups32.data(), kCols, out32.data());
    dequantize_int4_row(codes.data(), groups.data(), kCols, out.data(), group_cols);
    EXPECT_EQ(out, out32) << group_cols;
  }
}

// A group whose blocks differ is refused, not merged into the first block's pair.
TEST(Int4GroupsLayout, AGroupWithTwoPairsIsRefused) {
  constexpr int64_t kCols = 512;
  std::vector<BlockQ4_1> row = grouped_q4_1_row(kCols, 128, 3);
  std::vector<uint8_t> codes(kCols / 2);
  std::vector<uint32_t> groups(kCols / 128);
  ASSERT_TRUE(repack_int4_row(DType::Q4_1, row.data(), kCols, codes.data(), groups.data(), 128));
  row[6].m = fp32_to_fp16(fp16_to_fp32(row[6].m) + 0.25f);  // block 6 of group 1
  EXPECT_FALSE(repack_int4_row(DType::Q4_1, row.data(), kCols, codes.data(), groups.data(), 128));
  std::vector<uint32_t> groups32(kCols / 32);
  EXPECT_TRUE(repack_int4_row(DType::Q4_1, row.data(), kCols, codes.data(), groups32.data(), 32));
  // Q4_K's sub-blocks have scales of their own: not one pair per 64 columns.
  const std::vector<uint8_t> k_row = random_row(DType::Q4_K, kCols, 5);
  std::vector<uint32_t> k_groups(kCols / 64);
  EXPECT_FALSE(repack_int4_row(DType::Q4_K, k_row.data(), kCols, codes.data(), k_groups.data(), 64));
}

INSTANTIATE_TEST_SUITE_P(Types, Int4Groups, ::testing::Values(DType::Q4_0, DType::Q4_1, DType::Q4_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace folio::quant
