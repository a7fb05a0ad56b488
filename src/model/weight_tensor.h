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
  // 0: rows are in computing order. H > 0: the rows of H heads are stored as Hugging Face
  // stores Q and K, each head's first half of rotary dimensions then its second half, and
  // computing order interleaves them (stored row h*D + j*D/2 + i is computed row h*D + 2i + j),
  // the layout GGUF files and folio's RoPE use. A device that uploads the weights reorders the
  // rows as it copies; the CPU computes only on tensors in computing order.
  int32_t interleave_heads = 0;
  // A device's repacked copy, owned by its executor: the CPU's AMX panels of this matrix
  // (backend/cpu/quant/panel_gemm.h, backend/cpu/prepared_weights.h). Null: compute from data.
  const void* packed = nullptr;
  // Null: stored column c multiplies input c. Otherwise (cols,): stored column c multiplies
  // input input_order[c]. GPTQ's act-order checkpoints number their groups in the order the
  // inputs were quantized (hf_quantization.h); storing the columns in that order keeps every
  // 32-column block in one group, so the matrix stays 4-bit, and a matmul gathers its inputs
  // into this order first. Matrices that read one input and share an order share the pointer.
  const int32_t* input_order = nullptr;
  // 0: nothing known. Otherwise (Q4_1 from an AWQ / GPTQ checkpoint, hf_quantization.h): every
  // group of this many consecutive columns, from column 0, has one (d, m) in all its 32-column
  // blocks, so a layout with one (scale, min) per group loses nothing (quant/int4_groups.h).
  // A column slice keeps it where it cuts at group bounds.
  int32_t group_cols = 0;

  size_t row_stride_bytes() const { return row_bytes(type, cols); }
  const void* row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + static_cast<size_t>(r) * row_stride_bytes();
  }
  bool empty() const { return data == nullptr; }
  // The stored row that computed row r comes from.
  int64_t stored_row(int64_t r) const {
    if (interleave_heads == 0) return r;
    const int64_t head_dim = rows / interleave_heads, half = head_dim / 2;
    const int64_t h = r / head_dim, within = r % head_dim;
    return h * head_dim + (within % 2) * half + within / 2;
  }
};

}  // namespace folio
