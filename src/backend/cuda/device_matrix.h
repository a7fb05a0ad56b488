// A weight matrix on the GPU as the GEMMs read it: BF16, FP8 E4M3 with one FP32 scale per
// output row (W8A8), 4-bit codes with a (scale, min) per row and 32 columns (W4A16, the 4-bit
// GGUF types repacked) or 8-bit codes with a (scale, min) per row and 16 or 32 columns (W8A16,
// the 5- to 8-bit GGUF types repacked). Plain C++, no CUDA header.
#pragma once

#include <cstdint>

namespace folio::cuda {

enum class WeightFormat : uint8_t {
  kBf16,
  // w[r][c] = value(data[r][c]) * scales[r]; the scale is max |w[r]| / 448, so every row uses
  // E4M3's whole range and no calibration is needed (quantize_rows_e4m3, fp8_rows.h).
  kFp8E4M3,
  // w[r][c] = bf16(scale * q + min) from 4-bit codes and a BF16 (scale, min) per row and
  // 2^group_shift columns (quant/int4_groups.h); products on int4_gemm.h's kernels.
  kInt4,
  // w[r][c] = bf16(fmaf(q, scale, min)) from 8-bit codes and a BF16 (scale, min) per row and
  // 2^group_shift columns (quant/int8_groups.h); products on int8_gemm.h's kernels.
  kInt8,
};

// "bf16", "fp8", "int4" or "int8", for logs.
const char* weight_format_name(WeightFormat format);

struct DeviceMatrix {
  WeightFormat format = WeightFormat::kBf16;
  const void* data = nullptr;  // (rows, cols) row-major: bf16 bits, E4M3 bytes or kInt8 codes; kInt4: (rows, cols / 2)
  const float* scales = nullptr;     // kFp8E4M3: (rows,)
  const uint32_t* groups = nullptr;  // kInt4 / kInt8: (rows, cols >> group_shift) (scale, min) words
  int32_t group_shift = 5;           // kInt4: 5, or a checkpoint's wider groups (7: g128); kInt8: 4 (Q6_K) or 5
  // kInt4 / kInt8 of act-order checkpoints: (cols,) device, stored column c reads input
  // input_order[c] (WeightTensor::input_order); the GEMM gathers its input first. Null: in order.
  const int32_t* input_order = nullptr;
  // The inverse of input_order, (cols,) device: input i is stored column input_position[i]. The
  // kernels that make a matrix's input can write it in the matrix's order with it
  // (GemmPolicy::inputs_written_in_order), so the product reads its input as a plain matrix.
  const int32_t* input_position = nullptr;

  bool grouped() const { return format == WeightFormat::kInt4 || format == WeightFormat::kInt8; }
};

}  // namespace folio::cuda
