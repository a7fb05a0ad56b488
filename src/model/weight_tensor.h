// A read-only 2-D weight matrix in its stored format (F32, F16, block-quantized, ...).
// Rows are output features; each row holds `cols` elements in `type`'s encoding.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace folio {

struct WeightTensor {
  DType type = DType::F32;
  int64_t rows = 0;            // output features (GGUF dims[1])
  int64_t cols = 0;            // input features (GGUF dims[0], contiguous)
  const void* data = nullptr;  // rows * row_bytes(type, cols) bytes; owned elsewhere (mmap)

  size_t row_stride_bytes() const { return row_bytes(type, cols); }
  const void* row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + static_cast<size_t>(r) * row_stride_bytes();
  }
  bool empty() const { return data == nullptr; }
};

}  // namespace folio
