// 4-bit checkpoints of Hugging Face directories: AWQ (AutoAWQ's "gemm" layout) and GPTQ
// (AutoGPTQ / GPTQModel, format v1 or v2), described by `quantization_config` in config.json or
// by quant_config.json (AutoAWQ) / quantize_config.json (AutoGPTQ) beside it.
//
// Layouts (per linear layer of K inputs and N outputs, group size G, groups K / G):
//   AWQ:  qweight int32 (K, N / 8), qzeros int32 (K / G, N / 8), scales fp16 (K / G, N); the
//         8 nibbles of a word hold outputs 8c + (0, 2, 4, 6, 1, 3, 5, 7) from the lowest up;
//         w = s * (q - z).
//   GPTQ: qweight int32 (K / 8, N), nibble i of word (r, n) is input 8r + i; qzeros int32
//         (K / G, N / 8), nibble i is output 8c + i; scales fp16 (K / G, N); g_idx int32 (K,)
//         the group of each input (act-order shuffles it); w = s * (q - z) with z the stored
//         zero + 1 in format v1 (AutoGPTQ's offset), as stored in v2.
//
// Each such layer becomes a Q4_1 tensor (d = s, m = -s * z rounded to fp16; every 32-input
// block lies in one group when g_idx is the plain k / G), which the CPU's Q4 kernels compute
// with and the GPU keeps 4-bit (quant/int4_groups.h). A layer whose g_idx shuffles groups
// (desc_act) stores its columns sorted by group, with WeightTensor::input_order saying which
// input each reads: the matmuls gather their inputs into that order (as Marlin and ExLlama
// do), and the layer stays 4-bit. Only a g_idx whose groups are not multiples of 32 inputs
// makes an F16 layer: exact up to fp16 rounding of each weight, at 4x the memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/weight_tensor.h"

namespace folio {

class HfCheckpoint;

struct HfQuantization {
  // kFp8: FP8 E4M3 layers with float scales (hf_fp8.h), decoded to BF16 at load.
  enum class Method { kNone, kAwq, kGptq, kFp8 };
  Method method = Method::kNone;
  int32_t bits = 4;
  int32_t group_size = 128;  // -1: one group per input row
  bool desc_act = false;     // GPTQ: act-order (g_idx shuffled)
  bool sym = true;           // GPTQ
  bool zero_offset = true;   // GPTQ format v1: stored zeros are zero - 1
  int32_t block_size = 128;  // FP8: weight_block_size, for per-block scales
  std::string description;   // "awq 4-bit g128", for logs
};

// From config.json's text (quantization_config) or, when it has none, the side files in dir.
// kNone when the directory is not quantized; an error for methods or settings folio does not
// load (other bit widths, AWQ without zero points or in another layout, compressed-tensors
// other than float-quantized, ...).
Expected<HfQuantization> read_hf_quantization(const std::string& dir, const std::string& config_json_text);

// Whether `prefix` (e.g. "model.layers.0.self_attn.q_proj") is stored quantized.
bool hf_layer_is_quantized(const HfCheckpoint& checkpoint, const std::string& prefix);

// Layer `prefix` of `rows` outputs and `cols` inputs as a Q4_1 tensor (act-order: with its
// columns by group and input_order set; F16 where groups are not whole 32-column blocks) in
// bytes it appends to `owned`, rows in computing order (interleave_heads > 0: the Q / K
// reordering of WeightTensor::interleave_heads is applied here).
Expected<WeightTensor> load_hf_quantized_layer(const HfCheckpoint& checkpoint, const HfQuantization& q,
                                               const std::string& prefix, int64_t rows, int64_t cols,
                                               int32_t interleave_heads, std::vector<std::vector<uint8_t>>& owned);

}  // namespace folio
