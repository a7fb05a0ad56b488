// A weight matrix on the GPU as the GEMMs read it: BF16, or FP8 E4M3 with one FP32 scale per
// output row (the weight-quantization issue's W8A8 format). Plain C++, no CUDA header.
#pragma once

#include <cstdint>

namespace folio::cuda {

enum class WeightFormat : uint8_t {
  kBf16,
  // w[r][c] = value(data[r][c]) * scales[r]; the scale is max |w[r]| / 448, so every row uses
  // E4M3's whole range and no calibration is needed (quantize_rows_e4m3, fp8_rows.h).
  kFp8E4M3,
};

// "bf16" or "fp8", for logs.
const char* weight_format_name(WeightFormat format);

struct DeviceMatrix {
  WeightFormat format = WeightFormat::kBf16;
  const void* data = nullptr;     // (rows, cols) row-major: bf16 bits or E4M3 bytes
  const float* scales = nullptr;  // kFp8E4M3: (rows,)
};

}  // namespace folio::cuda
