// 4-bit groups (quant/gptq.h) as a GPTQ checkpoint stores them (AutoGPTQ's QuantLinear, format
// v1; the layout hf_quantization.h reads): qweight int32 (K / 8, N) with input 8r + i in nibble
// i of word (r, n); qzeros int32 (K / G, N / 8) with output 8c + i's zero minus one in nibble i;
// scales fp16 (K / G, N); g_idx int32 (K,). K inputs (the matrix's columns), N outputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "quant/gptq.h"

namespace folio {

struct GptqTensors {
  std::vector<int32_t> qweight;  // (K / 8, N)
  std::vector<int32_t> qzeros;   // (groups, N / 8)
  std::vector<uint16_t> scales;  // (groups, N), fp16 bits
  std::vector<int32_t> g_idx;    // (K,)
};

// An error unless K and N are multiples of 8.
Expected<GptqTensors> pack_gptq(const quant::Int4Matrix& m);

// config.json's text with a quantization_config for these settings (what transformers, vLLM and
// folio read: quant_method gptq, bits 4, group_size, desc_act, sym, checkpoint_format gptq).
Expected<std::string> gptq_config_json(const std::string& config_json_text, const quant::Int4Options& options,
                                       const std::string& method_note);

}  // namespace folio
