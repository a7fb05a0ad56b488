#include "backend/cuda/weight_layout_plan.h"

#include <algorithm>

#include "quant/int4_groups.h"
#include "quant/int8_groups.h"

namespace folio::cuda {

MatrixLayout matrix_layout(WeightFormat requested, std::span<const DType> parts, int64_t cols) {
  if (requested != WeightFormat::kInt4) return {requested};
  if (parts.empty() || cols % 64 != 0) return {WeightFormat::kBf16};
  bool all_int4 = true;
  int64_t group_cols = 32;
  for (DType type : parts) {
    if (!quant::int8_repackable(type)) return {WeightFormat::kBf16};
    all_int4 = all_int4 && quant::int4_repackable(type);
    group_cols = std::min(group_cols, quant::int8_group_cols(type));
  }
  if (all_int4) return {WeightFormat::kInt4};
  return {WeightFormat::kInt8, group_cols == 16 ? 4 : 5};
}

}  // namespace folio::cuda
