// 4-bit groups (quant/gptq.h) as an AWQ checkpoint stores them (AutoAWQ's WQLinear_GEMM, the
// layout hf_quantization.h reads): qweight int32 (K, N / 8) whose word c holds outputs
// 8c + (0, 2, 4, 6, 1, 3, 5, 7) in its nibbles from the lowest up; qzeros int32 (K / G, N / 8)
// the zeros in the same order (no offset); scales fp16 (K / G, N). K inputs, N outputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "quant/gptq.h"

namespace folio {

struct AwqTensors {
  std::vector<int32_t> qweight;  // (K, N / 8)
  std::vector<int32_t> qzeros;   // (groups, N / 8)
  std::vector<uint16_t> scales;  // (groups, N), fp16 bits
};

// An error unless N is a multiple of 8 or the groups are not the plain k / G.
Expected<AwqTensors> pack_awq(const quant::Int4Matrix& m);

// config.json's text with AWQ's quantization_config (quant_method awq, bits 4, group_size,
// zero_point, version gemm).
Expected<std::string> awq_config_json(const std::string& config_json_text, const quant::Int4Options& options);

}  // namespace folio
