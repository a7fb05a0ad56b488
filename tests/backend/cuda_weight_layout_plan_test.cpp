// What each layer matrix becomes on the GPU under --quantization auto (weight_layout_plan.h):
// pure C++, so the CPU CI covers the choice the GPU upload makes.
#include <gtest/gtest.h>

#include <vector>

#include "backend/cuda/weight_layout_plan.h"

namespace folio::cuda {
namespace {

MatrixLayout layout(const std::vector<DType>& parts, int64_t cols = 4096,
                    WeightFormat requested = WeightFormat::kInt4) {
  return matrix_layout(requested, parts, cols);
}

TEST(CudaWeightLayoutPlan, FourBitFilesStayInt4) {
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q4_K}) {
    EXPECT_EQ(layout({t, t, t}).format, WeightFormat::kInt4) << dtype_name(t);
  }
}

TEST(CudaWeightLayoutPlan, CheckpointGroupsWiderThan32KeepOneWordAGroup) {
  const DType q41[] = {DType::Q4_1, DType::Q4_1, DType::Q4_1};
  EXPECT_EQ(matrix_layout(WeightFormat::kInt4, q41, 4096, 0).group_shift, 5);  // nothing known
  EXPECT_EQ(matrix_layout(WeightFormat::kInt4, q41, 4096, 32).group_shift, 5);
  EXPECT_EQ(matrix_layout(WeightFormat::kInt4, q41, 4096, 64).group_shift, 6);
  EXPECT_EQ(matrix_layout(WeightFormat::kInt4, q41, 4096, 128).group_shift, 7);      // AWQ / GPTQ g128
  EXPECT_EQ(matrix_layout(WeightFormat::kInt4, q41, 4096, 4096).group_shift, 12);    // group_size -1
  EXPECT_EQ(matrix_layout(WeightFormat::kInt4, q41, 14336, 14336).group_shift, 11);  // 2^11 * 7
  EXPECT_EQ(matrix_layout(WeightFormat::kInt4, q41, 4096, 96).group_shift, 5);       // not a power of two
  EXPECT_EQ(matrix_layout(WeightFormat::kInt4, q41, 576, 128).group_shift, 6);       // 576 = 64 * 9
  // Only INT4 merges: an INT8 matrix keeps its parts' groups.
  const DType q8[] = {DType::Q8_0};
  EXPECT_EQ(matrix_layout(WeightFormat::kInt4, q8, 4096, 128).group_shift, 5);
}

TEST(CudaWeightLayoutPlan, FiveToEightBitTypesGoInt8WithTheirGroups) {
  for (DType t : {DType::Q8_0, DType::Q5_0, DType::Q5_1, DType::Q5_K}) {
    const MatrixLayout l = layout({t});
    EXPECT_EQ(l.format, WeightFormat::kInt8) << dtype_name(t);
    EXPECT_EQ(l.group_shift, 5) << dtype_name(t);
  }
  const MatrixLayout q6 = layout({DType::Q6_K});
  EXPECT_EQ(q6.format, WeightFormat::kInt8);
  EXPECT_EQ(q6.group_shift, 4);  // Q6_K's 16-wide sub-blocks
}

TEST(CudaWeightLayoutPlan, AQ4KMQkvMixGoesInt8In16ColumnGroups) {
  // llama.cpp's Q4_K_M: q and k Q4_K, v Q6_K; one fused matrix.
  const MatrixLayout qkv = layout({DType::Q4_K, DType::Q4_K, DType::Q6_K});
  EXPECT_EQ(qkv.format, WeightFormat::kInt8);
  EXPECT_EQ(qkv.group_shift, 4);
  const MatrixLayout mixed = layout({DType::Q5_0, DType::Q5_0, DType::Q8_0});  // Gemma's Q4_K_M q, k, v
  EXPECT_EQ(mixed.format, WeightFormat::kInt8);
  EXPECT_EQ(mixed.group_shift, 5);
}

TEST(CudaWeightLayoutPlan, FloatPartsAndOddWidthsStayBf16) {
  EXPECT_EQ(layout({DType::Q4_K, DType::F16}).format, WeightFormat::kBf16);
  EXPECT_EQ(layout({DType::BF16}).format, WeightFormat::kBf16);
  EXPECT_EQ(layout({DType::F32}).format, WeightFormat::kBf16);
  EXPECT_EQ(layout({DType::Q8_0}, 96).format, WeightFormat::kBf16);   // not a multiple of the 64-column chunk
  EXPECT_EQ(layout({DType::Q4_0}, 576).format, WeightFormat::kInt4);  // SmolLM2's width: 9 chunks
}

TEST(CudaWeightLayoutPlan, OtherRequestsAreKeptAsAsked) {
  EXPECT_EQ(layout({DType::Q4_K}, 4096, WeightFormat::kBf16).format, WeightFormat::kBf16);
  EXPECT_EQ(layout({DType::Q8_0}, 4096, WeightFormat::kFp8E4M3).format, WeightFormat::kFp8E4M3);
}

}  // namespace
}  // namespace folio::cuda
