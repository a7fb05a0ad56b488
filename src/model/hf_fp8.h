// FP8 checkpoints of Hugging Face directories: layers whose `weight` is F8_E4M3 with a float
// scale beside it, as llm-compressor ("compressed-tensors", float-quantized), transformers'
// fine-grained FP8 ("fp8") and FBGEMM ("fbgemm_fp8") write them:
//   weight_scale      one value (per tensor, shape [] or [1]) or one per output row ([N] or
//                     [N, 1]): w = e4m3(weight) * scale;
//   weight_scale_inv  one per block of B x B weights ([ceil(N / B), ceil(K / B)], B from the
//                     config's weight_block_size, 128 by default): the same product (the name
//                     says the stored value is the inverse of the quantizer's scale).
// Each such layer is decoded at load into BF16 (rows in computing order): the CPU and the GPU
// compute with it as with a BF16 checkpoint, and `--quantization fp8` requantizes it per row.
// Input scales (static activation quantization) are not used: activations stay dynamic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/weight_tensor.h"

namespace folio {

class HfCheckpoint;

// Whether `prefix`.weight is stored as F8_E4M3.
bool hf_layer_is_fp8(const HfCheckpoint& checkpoint, const std::string& prefix);

// Layer `prefix` (rows outputs, cols inputs) decoded to BF16 in bytes appended to `owned`;
// interleave_heads > 0 applies the Q / K reordering (WeightTensor::interleave_heads).
// block_size: weight_block_size's value for weight_scale_inv.
Expected<WeightTensor> load_hf_fp8_layer(const HfCheckpoint& checkpoint, const std::string& prefix, int64_t rows,
                                         int64_t cols, int32_t interleave_heads, int32_t block_size,
                                         std::vector<std::vector<uint8_t>>& owned);

}  // namespace folio
