// The quantizer `folio quantize` writes with: per block or sub-block, the (scale, min) or scale
// that minimizes the weighted squared error of the row among a grid of candidates, each refined
// by weighted least squares for its rounding, instead of the reference's plain min/max. The
// weight of element i is importance[i] when given (an importance matrix: the mean squared
// activation of input feature i), else |x_i| + rms(sub-block), which favours the large values
// without ignoring the rest. The K-quants and Q4_0 / Q4_1 / Q5_0 / Q5_1 are searched; other
// types go to quantize_row_reference (Q8_0 rounds to nearest: at 8 bits a search gains little).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace folio::quant {

// As quantize_row_reference; importance: n floats or null.
bool quantize_row_searched(DType type, const float* src, void* dst, int64_t n, const float* importance = nullptr);

}  // namespace folio::quant
