// A weight matrix on the GPU as the GEMMs read it: BF16, FP8 E4M3 with one FP32 scale per
// output row (W8A8), or 4-bit codes with a (scale, min) per row and 32 columns (W4A16, the
// 4-bit GGUF types repacked). Plain C++, no CUDA header.
#pragma once

#include <cstdint>

namespace folio::cuda {

enum class WeightFormat : uint8_t {
  kBf16,
  // w[r][c] = value(data[r][c]) * scales[r]; the scale is max |w[r]| / 448, so every row uses
  // E4M3's whole range and no calibration is needed (quantize_rows_e4m3, fp8_rows.h).
  kFp8E4M3,
  // w[r][c] = bf16(scale * q + min) from 4-bit codes and a BF16 (scale, min) per row and 32
  // columns (quant/int4_groups.h); products on int4_gemm.h's kernels.
  kInt4,
};

// "bf16", "fp8" or "int4", for logs.
const char* weight_format_name(WeightFormat format);

struct DeviceMatrix {
  WeightFormat format = WeightFormat::kBf16;
  const void* data = nullptr;        // (rows, cols) row-major: bf16 bits or E4M3 bytes; kInt4: (rows, cols / 2) codes
  const float* scales = nullptr;     // kFp8E4M3: (rows,)
  const uint32_t* groups = nullptr;  // kInt4: (rows, cols / 32) (scale, min) words
};

}  // namespace folio::cuda
