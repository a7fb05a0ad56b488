// The quantizer `folio quantize` writes K-quants with: per sub-block, the (scale, min) or scale
// that minimizes the weighted squared error of the row among a grid of candidates, each refined
// by weighted least squares for its rounding, instead of the reference's plain min/max. The
// weight of element i is importance[i] when given (an importance matrix: the mean squared
// activation of input feature i), else |x_i| + rms(sub-block), which favours the large values
// without ignoring the rest. Other types go to quantize_row_reference (Q8_0 and Q4_0 round to
// nearest, as GGUF's own quantizers do without an importance matrix).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace folio::quant {

// As quantize_row_reference; importance: n floats or null.
bool quantize_row_searched(DType type, const float* src, void* dst, int64_t n, const float* importance = nullptr);

}  // namespace folio::quant
