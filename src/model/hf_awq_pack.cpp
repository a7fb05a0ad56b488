#include "model/hf_awq_pack.h"

#include <nlohmann/json.hpp>

#include "core/fp16.h"

namespace folio {
namespace {

constexpr int kOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

}  // namespace

Expected<AwqTensors> pack_awq(const quant::Int4Matrix& m) {
  const int64_t n = m.rows, k = m.cols, groups = m.groups();
  if (n % 8 != 0) return Status::error("AWQ packs 8 outputs a word: " + std::to_string(n) + " is not a multiple of 8");
  for (int64_t c = 0; c < k; ++c) {
    if (m.g_idx[static_cast<size_t>(c)] != c / m.group_size) return Status::error("AWQ has no act-order");
  }
  AwqTensors t;
  t.qweight.resize(static_cast<size_t>(k * n / 8));
  for (int64_t in = 0; in < k; ++in) {
    for (int64_t c = 0; c < n / 8; ++c) {
      uint32_t word = 0;
      for (int i = 0; i < 8; ++i) {
        word |= static_cast<uint32_t>(m.q[static_cast<size_t>((8 * c + kOrder[i]) * k + in)] & 0xf) << (4 * i);
      }
      t.qweight[static_cast<size_t>(in * n / 8 + c)] = static_cast<int32_t>(word);
    }
  }
  t.qzeros.resize(static_cast<size_t>(groups * n / 8));
  t.scales.resize(static_cast<size_t>(groups * n));
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t c = 0; c < n / 8; ++c) {
      uint32_t word = 0;
      for (int i = 0; i < 8; ++i) {
        word |= static_cast<uint32_t>(m.zeros[static_cast<size_t>(g * n + 8 * c + kOrder[i])] & 0xf) << (4 * i);
      }
      t.qzeros[static_cast<size_t>(g * n / 8 + c)] = static_cast<int32_t>(word);
    }
    for (int64_t out = 0; out < n; ++out) {
      t.scales[static_cast<size_t>(g * n + out)] = fp32_to_fp16(m.scales[static_cast<size_t>(g * n + out)]);
    }
  }
  return t;
}

Expected<std::string> awq_config_json(const std::string& config_json_text, const quant::Int4Options& options) {
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(config_json_text, nullptr, false);
  if (config.is_discarded() || !config.is_object()) return Status::error("config.json is not a JSON object");
  config["quantization_config"] = {
      {"quant_method", "awq"}, {"bits", 4},         {"group_size", options.group_size},
      {"zero_point", true},    {"version", "gemm"}, {"quantizer", "folio quantize (awq scales, no clipping search)"}};
  config["torch_dtype"] = "float16";
  return config.dump(2) + "\n";
}

}  // namespace folio
