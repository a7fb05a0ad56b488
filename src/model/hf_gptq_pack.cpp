#include "model/hf_gptq_pack.h"

#include <nlohmann/json.hpp>

#include "core/fp16.h"

namespace folio {

Expected<GptqTensors> pack_gptq(const quant::Int4Matrix& m) {
  const int64_t n = m.rows, k = m.cols, groups = m.groups();
  if (k % 8 != 0 || n % 8 != 0) {
    return Status::error("GPTQ packs 8 values a word: " + std::to_string(k) + " inputs x " + std::to_string(n) +
                         " outputs are not multiples of 8");
  }
  GptqTensors t;
  t.qweight.assign(static_cast<size_t>(k / 8 * n), 0);
  for (int64_t r = 0; r < k / 8; ++r) {
    for (int64_t out = 0; out < n; ++out) {
      uint32_t word = 0;
      for (int64_t i = 0; i < 8; ++i) {
        word |= static_cast<uint32_t>(m.q[static_cast<size_t>(out * k + 8 * r + i)] & 0xf) << (4 * i);
      }
      t.qweight[static_cast<size_t>(r * n + out)] = static_cast<int32_t>(word);
    }
  }
  t.qzeros.assign(static_cast<size_t>(groups * n / 8), 0);
  t.scales.resize(static_cast<size_t>(groups * n));
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t c = 0; c < n / 8; ++c) {
      uint32_t word = 0;
      for (int64_t i = 0; i < 8; ++i) {
        // Format v1 stores zero - 1 (AutoGPTQ's offset); zeros are 1..15, so 0..14 here.
        word |= static_cast<uint32_t>((m.zeros[static_cast<size_t>(g * n + 8 * c + i)] - 1) & 0xf) << (4 * i);
      }
      t.qzeros[static_cast<size_t>(g * n / 8 + c)] = static_cast<int32_t>(word);
    }
    for (int64_t out = 0; out < n; ++out) {
      t.scales[static_cast<size_t>(g * n + out)] = fp32_to_fp16(m.scales[static_cast<size_t>(g * n + out)]);
    }
  }
  t.g_idx = m.g_idx;
  return t;
}

Expected<std::string> gptq_config_json(const std::string& config_json_text, const quant::Int4Options& options,
                                       const std::string& method_note) {
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(config_json_text, nullptr, false);
  if (config.is_discarded() || !config.is_object()) return Status::error("config.json is not a JSON object");
  config["quantization_config"] = {
      {"quant_method", "gptq"},           {"bits", 4},
      {"group_size", options.group_size}, {"desc_act", options.act_order},
      {"sym", options.symmetric},         {"damp_percent", options.damp},
      {"checkpoint_format", "gptq"},      {"quantizer", "folio quantize (" + method_note + ")"}};
  // transformers reads the weights' dtype from here: the scales and unquantized tensors are fp16.
  config["torch_dtype"] = "float16";
  return config.dump(2) + "\n";
}

}  // namespace folio
