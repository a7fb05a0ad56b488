#include "backend/cuda/weight_layout_plan.h"

#include <algorithm>

#include "quant/int4_groups.h"
#include "quant/int8_groups.h"

namespace folio::cuda {

MatrixLayout matrix_layout(WeightFormat requested, std::span<const DType> parts, int64_t cols, int64_t group_cols) {
  if (requested != WeightFormat::kInt4) return {requested};
  if (parts.empty() || cols % 64 != 0) return {WeightFormat::kBf16};
  bool all_int4 = true;
  int64_t int8_group_cols = 32;
  for (DType type : parts) {
    if (!quant::int8_repackable(type)) return {WeightFormat::kBf16};
    all_int4 = all_int4 && quant::int4_repackable(type);
    int8_group_cols = std::min(int8_group_cols, quant::int8_group_cols(type));
  }
  if (all_int4) {
    int32_t shift = 5;
    if (group_cols > 0) {
      while (group_cols % (int64_t{2} << shift) == 0 && cols % (int64_t{2} << shift) == 0) ++shift;
    }
    return {WeightFormat::kInt4, shift};
  }
  return {WeightFormat::kInt8, int8_group_cols == 16 ? 4 : 5};
}

}  // namespace folio::cuda
