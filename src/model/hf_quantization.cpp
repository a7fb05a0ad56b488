#include "model/hf_quantization.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/fp16.h"
#include "model/hf_checkpoint.h"
#include "quant/block_formats.h"

namespace folio {
namespace {

using nlohmann::json;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Status parse_quantization(const json& c, const std::string& where, HfQuantization& out) {
  auto error = [&](const std::string& message) { return Status::error(where + ": " + message); };
  auto integer = [&](std::initializer_list<const char*> keys, int32_t& value) -> Status {
    for (const char* key : keys) {
      const auto it = c.find(key);
      if (it == c.end() || it->is_null()) continue;
      if (!it->is_number_integer()) return error("'" + std::string(key) + "' must be an integer, got " + it->dump());
      value = static_cast<int32_t>(it->get<int64_t>());
      return Status::ok();
    }
    return Status::ok();
  };
  auto boolean = [&](const char* key, bool& value) -> Status {
    const auto it = c.find(key);
    if (it == c.end() || it->is_null()) return Status::ok();
    if (!it->is_boolean()) return error("'" + std::string(key) + "' must be true or false, got " + it->dump());
    value = it->get<bool>();
    return Status::ok();
  };
  auto text = [&](const char* key) {
    const auto it = c.find(key);
    return it != c.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  std::string method = text("quant_method");
  // AutoAWQ's quant_config.json names no method; its keys are its own.
  if (method.empty() && (c.contains("w_bit") || c.contains("q_group_size"))) method = "awq";
  if (method.empty() && c.contains("desc_act")) method = "gptq";
  if (method == "fp8" || method == "fbgemm_fp8" || method == "compressed-tensors") {
    if (method == "compressed-tensors" && text("format") != "float-quantized") {
      return error("compressed-tensors format '" + text("format") +
                   "' is not supported (float-quantized: FP8 weights with scales)");
    }
    out.method = HfQuantization::Method::kFp8;
    const auto block = c.find("weight_block_size");
    if (block != c.end() && !block->is_null()) {
      if (!block->is_array() || block->size() != 2 || !(*block)[0].is_number_integer() || (*block)[0] != (*block)[1] ||
          (*block)[0].get<int64_t>() < 1) {
        return error("weight_block_size must be [B, B], got " + block->dump());
      }
      out.block_size = static_cast<int32_t>((*block)[0].get<int64_t>());
    }
    out.description = method + " e4m3 weights (decoded to bf16)";
    return Status::ok();
  }
  if (method != "awq" && method != "gptq") {
    return error("quantization method '" + method +
                 "' is not supported (awq, gptq, fp8, fbgemm_fp8, compressed-tensors)");
  }
  out.method = method == "awq" ? HfQuantization::Method::kAwq : HfQuantization::Method::kGptq;
  for (const Status& s :
       {integer({"bits", "w_bit"}, out.bits), integer({"group_size", "q_group_size"}, out.group_size)}) {
    if (!s) return s;
  }
  if (out.bits != 4) return error(std::to_string(out.bits) + "-bit " + method + " is not supported (4-bit)");
  if (out.group_size != -1 && (out.group_size < 32 || out.group_size % 32 != 0)) {
    return error("group_size " + std::to_string(out.group_size) + " is not supported (-1 or a multiple of 32)");
  }
  if (out.method == HfQuantization::Method::kAwq) {
    bool zero_point = true;
    if (Status s = boolean("zero_point", zero_point); !s) return s;
    if (!zero_point) return error("AWQ without zero points is not supported");
    const std::string version = text("version");
    if (!version.empty() && version != "gemm" && version != "GEMM") {
      return error("AWQ version '" + version + "' is not supported (gemm)");
    }
  } else {
    for (const Status& s : {boolean("desc_act", out.desc_act), boolean("sym", out.sym)}) {
      if (!s) return s;
    }
    const std::string format = text("checkpoint_format");
    if (!format.empty() && format != "gptq" && format != "gptq_v2") {
      return error("GPTQ checkpoint_format '" + format + "' is not supported (gptq, gptq_v2)");
    }
    out.zero_offset = format != "gptq_v2";
  }
  out.description = method + " 4-bit g" + std::to_string(out.group_size) +
                    (out.method == HfQuantization::Method::kGptq
                         ? std::string(out.sym ? " sym" : " asym") + (out.desc_act ? " act-order" : "")
                         : std::string());
  return Status::ok();
}

// The 4-bit value at (input k, output n) and the group's zero, per layout.
struct Unpacker {
  HfQuantization::Method method;
  const int32_t* qweight;
  const int32_t* qzeros;
  int64_t n_out;

  static int nibble(int32_t word, int i) { return static_cast<int>((static_cast<uint32_t>(word) >> (4 * i)) & 0xf); }
  // AWQ stores output 8c + kOrder[i] in nibble i; kSlot is its inverse.
  static constexpr int kSlot[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  int q(int64_t k, int64_t n) const {
    if (method == HfQuantization::Method::kAwq) return nibble(qweight[k * (n_out / 8) + n / 8], kSlot[n % 8]);
    return nibble(qweight[(k / 8) * n_out + n], static_cast<int>(k % 8));
  }
  int zero(int64_t g, int64_t n) const {
    const int32_t word = qzeros[g * (n_out / 8) + n / 8];
    return method == HfQuantization::Method::kAwq ? nibble(word, kSlot[n % 8]) : nibble(word, static_cast<int>(n % 8));
  }
};

// body(r) for every row, on all cores (a 70B checkpoint repacks 70 billion weights).
template <typename Body>
void for_rows(int64_t rows, const Body& body) {
  const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 32);
  const int64_t per = (rows + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (int64_t begin = 0; begin < rows; begin += per) {
    pool.emplace_back([&body, begin, end = std::min(rows, begin + per)] {
      for (int64_t r = begin; r < end; ++r) body(r);
    });
  }
  for (std::thread& t : pool) t.join();
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

Expected<HfQuantization> read_hf_quantization(const std::string& dir, const std::string& config_json_text) {
  HfQuantization out;
  try {
    const json config = json::parse(config_json_text, nullptr, false);
    if (config.is_object() && config.contains("quantization_config") && !config["quantization_config"].is_null()) {
      const json& c = config["quantization_config"];
      if (!c.is_object()) return Status::error(dir + "/config.json: 'quantization_config' must be an object");
      if (Status s = parse_quantization(c, dir + "/config.json quantization_config", out); !s) return s;
      return out;
    }
    for (const char* name : {"quant_config.json", "quantize_config.json"}) {
      if (dir.empty()) break;
      const std::string path = dir + "/" + name;
      const std::string text = read_text(path);
      if (text.empty()) continue;
      const json c = json::parse(text, nullptr, false);
      if (!c.is_object()) return Status::error(path + ": not a JSON object");
      if (Status s = parse_quantization(c, path, out); !s) return s;
      return out;
    }
  } catch (const json::exception& e) {
    return Status::error(dir + ": quantization config: " + e.what());
  }
  return out;
}

bool hf_layer_is_quantized(const HfCheckpoint& checkpoint, const std::string& prefix) {
  return checkpoint.find(prefix + ".qweight").tensor != nullptr;
}

Expected<WeightTensor> load_hf_quantized_layer(const HfCheckpoint& checkpoint, const HfQuantization& q,
                                               const std::string& prefix, int64_t rows, int64_t cols,
                                               int32_t interleave_heads, std::vector<std::vector<uint8_t>>& owned) {
  const bool awq = q.method == HfQuantization::Method::kAwq;
  const int64_t group = q.group_size == -1 ? cols : q.group_size;
  if (cols % 32 != 0 || rows % 8 != 0 || cols % group != 0) {
    return Status::error("model: quantized layer '" + prefix + "' of " + std::to_string(rows) + " x " +
                         std::to_string(cols) + ": folio needs inputs in multiples of 32 and of the group size " +
                         std::to_string(group) + ", outputs in multiples of 8");
  }
  const int64_t groups = cols / group;
  auto tensor = [&](const char* suffix, SafetensorsDtype dtype,
                    const std::vector<int64_t>& shape) -> Expected<HfCheckpoint::Entry> {
    const std::string name = prefix + suffix;
    const HfCheckpoint::Entry e = checkpoint.find(name);
    if (e.tensor == nullptr) return Status::error("model: tensor '" + name + "' is missing from " + checkpoint.dir());
    if (e.tensor->shape != shape || e.tensor->dtype != dtype) {
      return Status::error("model: tensor '" + name + "' has shape " + shape_string(e.tensor->shape) + " and dtype " +
                           std::string(safetensors_dtype_name(e.tensor->dtype)) + "; " + q.description + " implies " +
                           shape_string(shape) + " " + std::string(safetensors_dtype_name(dtype)));
    }
    return e;
  };
  Expected<HfCheckpoint::Entry> qweight = tensor(
      ".qweight", SafetensorsDtype::kI32, awq ? std::vector<int64_t>{cols, rows / 8} : std::vector{cols / 8, rows});
  if (!qweight) return qweight.status();
  Expected<HfCheckpoint::Entry> qzeros = tensor(".qzeros", SafetensorsDtype::kI32, {groups, rows / 8});
  if (!qzeros) return qzeros.status();
  Expected<HfCheckpoint::Entry> scales = tensor(".scales", SafetensorsDtype::kF16, {groups, rows});
  if (!scales) return scales.status();
  // Copies, not casts: safetensors data is only byte-aligned.
  auto words = [](const HfCheckpoint::Entry& e) {
    const std::span<const uint8_t> bytes = e.file->data(*e.tensor);
    std::vector<int32_t> out(bytes.size() / 4);
    std::memcpy(out.data(), bytes.data(), out.size() * 4);
    return out;
  };
  const std::vector<int32_t> qw = words(*qweight), qz = words(*qzeros);
  std::vector<uint16_t> s(static_cast<size_t>(groups * rows));
  std::memcpy(s.data(), scales->file->data(*scales->tensor).data(), s.size() * 2);
  std::vector<int32_t> g_idx(static_cast<size_t>(cols));
  for (int64_t k = 0; k < cols; ++k) g_idx[static_cast<size_t>(k)] = static_cast<int32_t>(k / group);
  bool shuffled = false;
  if (!awq && checkpoint.find(prefix + ".g_idx").tensor != nullptr) {
    Expected<HfCheckpoint::Entry> gi = tensor(".g_idx", SafetensorsDtype::kI32, {cols});
    if (!gi) return gi.status();
    g_idx = words(*gi);
    for (int64_t k = 0; k < cols; ++k) {
      const int32_t g = g_idx[static_cast<size_t>(k)];
      if (g < 0 || g >= groups) {
        return Status::error("model: tensor '" + prefix + ".g_idx' names group " + std::to_string(g) + " of " +
                             std::to_string(groups));
      }
      // Q4_1 needs one group per 32-input block.
      shuffled = shuffled || g != g_idx[static_cast<size_t>(k / 32 * 32)];
    }
  }
  // Act-order: the columns are stored by group (inputs in their order within one), which puts
  // every 32-column block in one group when each group holds a multiple of 32 inputs (GPTQ's
  // act-order gives each exactly group_size). Otherwise the layer becomes F16.
  std::vector<int32_t> column_input(static_cast<size_t>(cols));
  for (int64_t k = 0; k < cols; ++k) column_input[static_cast<size_t>(k)] = static_cast<int32_t>(k);
  bool reordered = false;
  if (shuffled) {
    std::stable_sort(column_input.begin(), column_input.end(), [&](int32_t a, int32_t b) {
      return g_idx[static_cast<size_t>(a)] < g_idx[static_cast<size_t>(b)];
    });
    reordered = true;
    for (int64_t c = 0; c < cols; ++c) {
      const int32_t block_group = g_idx[static_cast<size_t>(column_input[static_cast<size_t>(c / 32 * 32)])];
      reordered = reordered && g_idx[static_cast<size_t>(column_input[static_cast<size_t>(c)])] == block_group;
    }
  }
  const Unpacker unpack{q.method, qw.data(), qz.data(), rows};
  const int zero_offset = !awq && q.zero_offset ? 1 : 0;
  WeightTensor order;
  order.rows = rows;
  order.interleave_heads = interleave_heads;

  WeightTensor out;
  out.rows = rows;
  out.cols = cols;
  if (!shuffled || reordered) {
    out.type = DType::Q4_1;
    // One (d, m) per group of `group` columns from column 0 when each such span is one group: in
    // checkpoint order with a plain g_idx, in act-order's order when every group holds exactly
    // `group` inputs (GPTQ's do).
    bool whole_groups = group % 32 == 0;
    for (int64_t c = 0; whole_groups && c < cols; ++c) {
      whole_groups = g_idx[static_cast<size_t>(column_input[static_cast<size_t>(c)])] ==
                     g_idx[static_cast<size_t>(column_input[static_cast<size_t>(c / group * group)])];
    }
    if (whole_groups && group <= INT32_MAX) out.group_cols = static_cast<int32_t>(group);
    owned.emplace_back(static_cast<size_t>(rows * (cols / 32)) * sizeof(quant::BlockQ4_1));
    auto* blocks = reinterpret_cast<quant::BlockQ4_1*>(owned.back().data());
    const int32_t* input = column_input.data();
    for_rows(rows, [&](int64_t r) {
      const int64_t n = order.stored_row(r);
      for (int64_t b = 0; b < cols / 32; ++b) {
        quant::BlockQ4_1& block = blocks[r * (cols / 32) + b];
        const int64_t g = g_idx[static_cast<size_t>(input[b * 32])];
        const float scale = fp16_to_fp32(s[static_cast<size_t>(g * rows + n)]);
        const int zero = unpack.zero(g, n) + zero_offset;
        block.d = s[static_cast<size_t>(g * rows + n)];
        block.m = fp32_to_fp16(-scale * static_cast<float>(zero));
        for (int l = 0; l < 16; ++l) {
          block.qs[l] =
              static_cast<uint8_t>(unpack.q(input[b * 32 + l], n) | (unpack.q(input[b * 32 + 16 + l], n) << 4));
        }
      }
    });
    if (reordered) {
      out.data = owned.back().data();
      owned.emplace_back(column_input.size() * sizeof(int32_t));
      std::memcpy(owned.back().data(), column_input.data(), owned.back().size());
      out.input_order = reinterpret_cast<const int32_t*>(owned.back().data());
      return out;
    }
  } else {
    out.type = DType::F16;
    owned.emplace_back(static_cast<size_t>(rows * cols) * 2);
    auto* values = reinterpret_cast<uint16_t*>(owned.back().data());
    for_rows(rows, [&](int64_t r) {
      const int64_t n = order.stored_row(r);
      for (int64_t k = 0; k < cols; ++k) {
        const int64_t g = g_idx[static_cast<size_t>(k)];
        const float scale = fp16_to_fp32(s[static_cast<size_t>(g * rows + n)]);
        const int zero = unpack.zero(g, n) + zero_offset;
        values[r * cols + k] = fp32_to_fp16(scale * static_cast<float>(unpack.q(k, n) - zero));
      }
    });
  }
  out.data = owned.back().data();
  return out;
}

}  // namespace folio
