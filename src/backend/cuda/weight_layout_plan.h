// Which layout a layer matrix gets on the GPU (cuda_weights.cpp): plain C++, so the CPU build
// tests the choice too (tests/backend/cuda_weight_layout_plan_test.cpp).
#pragma once

#include <cstdint>
#include <span>

#include "backend/cuda/device_matrix.h"
#include "core/dtype.h"

namespace folio::cuda {

struct MatrixLayout {
  WeightFormat format = WeightFormat::kBf16;
  int32_t group_shift = 5;  // kInt4 / kInt8: log2 of the columns per (scale, min)
};

// requested: what the layers' matrices were asked to become; kInt4 means "quantized as the file
// is" (--quantization auto). parts: the GGUF types of the matrix's parts (Q|K|V, gate|up, or
// one), each `cols` wide. kInt4: INT4 where every part is a 4-bit type, INT8 where every part
// repacks into the 8-bit layout (16-column groups if one is Q6_K), BF16 otherwise or when cols
// is not a multiple of 64 (the kernels' chunk). Any other request is returned as it is.
// group_cols: columns over which every part's 32-column blocks share one (scale, min)
// (WeightTensor::group_cols; 0 when any part's is unknown): INT4 then keeps one word per the
// largest power of two dividing both it and cols (128 for a g128 checkpoint), not one per 32.
MatrixLayout matrix_layout(WeightFormat requested, std::span<const DType> parts, int64_t cols, int64_t group_cols = 0);

}  // namespace folio::cuda
