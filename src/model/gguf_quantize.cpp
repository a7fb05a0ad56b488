#include "model/gguf_quantize.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>

#include "model/gguf_writer.h"
#include "quant/formats.h"
#include "quant/quantize_search.h"

namespace folio {
namespace {

// llama.cpp's ftype numbers for the files these recipes make (general.file_type).
const QuantizeRecipe kRecipes[] = {
    {"q4_0", DType::Q4_0, false, 2},
    {"q4_1", DType::Q4_1, false, 3},
    {"q5_0", DType::Q5_0, false, 8},
    {"q5_1", DType::Q5_1, false, 9},
    {"q8_0", DType::Q8_0, false, 7},
    {"q4_k", DType::Q4_K, false, 14},
    {"q5_k", DType::Q5_K, false, 16},
    {"q6_k", DType::Q6_K, false, 18},
    {"q4_k_m", DType::Q4_K, true, 15},
    {"q5_k_m", DType::Q5_K, true, 17},
    // Float targets: decoding any file, a quantized one included, loses nothing more.
    {"f32", DType::F32, false, 0},
    {"f16", DType::F16, false, 1},
    {"bf16", DType::BF16, false, 32},
};

bool is_float(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

bool is_k_quant(DType t) {
  return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K;
}

// The 32-element type with at least the bits of a K-quant, for rows that are not 256 wide.
DType row_fallback(DType t) {
  switch (t) {
    case DType::Q4_K: return DType::Q5_0;
    case DType::Q5_K: return DType::Q5_1;
    default: return DType::Q8_0;
  }
}

// The layers that get more bits in the mixed recipes: the first and last eighth, and every
// third one between them.
bool more_bits(int32_t layer, int32_t layers) {
  return layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2;
}

std::optional<int32_t> layer_of(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return std::nullopt;
  int32_t layer = 0;
  size_t i = 4;
  if (i >= name.size() || name[i] < '0' || name[i] > '9') return std::nullopt;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) layer = layer * 10 + (name[i] - '0');
  return layer;
}

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

}  // namespace

Expected<QuantizeRecipe> quantize_recipe(std::string_view name) {
  for (const QuantizeRecipe& r : kRecipes) {
    if (r.name == name) return r;
  }
  std::string known;
  for (const std::string& n : quantize_recipe_names()) known += (known.empty() ? "" : ", ") + n;
  return Status::error("unknown quantization type '" + std::string(name) + "' (known: " + known + ")");
}

std::vector<std::string> quantize_recipe_names() {
  std::vector<std::string> names;
  for (const QuantizeRecipe& r : kRecipes) names.push_back(r.name);
  return names;
}

std::optional<DType> quantized_type(const QuantizeRecipe& recipe, const GgufTensorInfo& tensor, int32_t num_layers) {
  if (tensor.dims.size() != 2 || !ends_with(tensor.name, ".weight")) return std::nullopt;
  DType type = recipe.base;
  if (recipe.mixed) {
    const bool head = tensor.name == "output.weight";
    const std::optional<int32_t> layer = layer_of(tensor.name);
    const bool widened_layer = layer && more_bits(*layer, num_layers) &&
                               (ends_with(tensor.name, ".attn_v.weight") || ends_with(tensor.name, ".ffn_down.weight"));
    if (head || widened_layer) type = DType::Q6_K;
  }
  const int64_t cols = tensor.dims[0];
  if (is_float(type)) return type;
  if (is_k_quant(type) && cols % 256 != 0) type = row_fallback(type);
  if (cols % 32 != 0) return DType::F16;  // no block type fits: kept at 16 bits
  return type;
}

Status quantize_gguf(const GgufFile& in, const std::string& out, const QuantizeRecipe& recipe,
                     const std::function<void(const QuantizeProgress&)>& progress, const ImportanceFn& importance) {
  const std::optional<int64_t> layers =
      in.get_int((in.get_string("general.architecture").value_or("llama") + ".block_count"));
  const int32_t num_layers = static_cast<int32_t>(layers.value_or(0));
  const bool has_output = in.find_tensor("output.weight") != nullptr;
  // Which tensors change, checked before anything is written.
  std::vector<std::optional<DType>> targets;
  for (const GgufTensorInfo& t : in.tensors()) {
    std::optional<DType> target = quantized_type(recipe, t, num_layers);
    // A tied embedding is the vocabulary projection too: the mixed recipes give it Q6_K.
    if (target && recipe.mixed && !has_output && t.name == "token_embd.weight") {
      target = t.dims[0] % 256 == 0 ? DType::Q6_K : DType::Q8_0;
    }
    if (target && !is_float(recipe.base) && !is_float(t.type)) {
      return Status::error("tensor '" + t.name + "' is already " + std::string(dtype_name(t.type)) +
                           ": folio quantize --type " + recipe.name +
                           " reads F32, F16 or BF16 weights (quantizing a quantized file again would stack both "
                           "errors; --type f16 decodes it)");
    }
    targets.push_back(target);
  }

  GgufWriter writer;
  for (const auto& [key, value] : in.metadata()) {
    // The writer aligns to 32 bytes; the file type is the recipe's.
    if (key == "general.alignment" || key == "general.file_type" || key == "general.quantization_version") continue;
    writer.add_value(key, value);
  }
  writer.add_u32("general.file_type", recipe.file_type);
  writer.add_u32("general.quantization_version", 2);
  const size_t count = in.tensors().size();
  for (size_t i = 0; i < count; ++i) {
    const GgufTensorInfo& t = in.tensors()[i];
    const uint8_t* src = in.tensor_data(t);
    std::vector<uint64_t> dims(t.dims.begin(), t.dims.end());
    if (!targets[i]) {
      writer.add_tensor(t.name, dims, t.type, [src](uint64_t offset, std::span<uint8_t> chunk) {
        std::memcpy(chunk.data(), src + offset, chunk.size());
      });
      continue;
    }
    const DType from = t.type, to = *targets[i];
    const int64_t cols = t.dims[0];
    auto weights = std::make_shared<std::vector<float>>(importance ? importance(t.name) : std::vector<float>{});
    if (!weights->empty() && static_cast<int64_t>(weights->size()) != cols) {
      return Status::error("importance of '" + t.name + "' has " + std::to_string(weights->size()) +
                           " entries for rows of " + std::to_string(cols));
    }
    const size_t in_row = row_bytes(from, cols), out_row = row_bytes(to, cols);
    writer.add_tensor(t.name, dims, to, [=](uint64_t offset, std::span<uint8_t> chunk) {
      // Rows in parallel: the searching K-quant quantizer is ~50x a copy's cost.
      const int64_t first = static_cast<int64_t>(offset / out_row);
      const int64_t rows = static_cast<int64_t>(chunk.size() / out_row);
      const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 64);
      auto work = [&](int64_t begin, int64_t end) {
        std::vector<float> row(static_cast<size_t>(cols));
        for (int64_t r = begin; r < end; ++r) {
          quant::dequantize_row(from, src + static_cast<size_t>(first + r) * in_row, row.data(), cols);
          quant::quantize_row_searched(to, row.data(), chunk.data() + static_cast<size_t>(r) * out_row, cols,
                                       weights->empty() ? nullptr : weights->data());
        }
      };
      std::vector<std::thread> pool;
      const int64_t per = (rows + threads - 1) / threads;
      for (int64_t b = per; b < rows; b += per) pool.emplace_back(work, b, std::min(rows, b + per));
      work(0, std::min(rows, per));
      for (std::thread& th : pool) th.join();
    });
  }
  // Progress per tensor: the writer reports bytes; the tensor is found from the running total.
  std::vector<uint64_t> ends;
  std::vector<std::pair<DType, DType>> kinds;
  uint64_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    const GgufTensorInfo& t = in.tensors()[i];
    const DType to = targets[i].value_or(t.type);
    uint64_t rows = 1;
    for (size_t d = 1; d < t.dims.size(); ++d) rows *= static_cast<uint64_t>(t.dims[d]);
    total = (total + 31) / 32 * 32 + row_bytes(to, t.dims[0]) * rows;
    ends.push_back(total);
    kinds.emplace_back(t.type, to);
  }
  size_t current = 0;
  return writer.write(out, [&](uint64_t done, uint64_t all) {
    while (current + 1 < count && done > ends[current]) ++current;
    if (!progress) return;
    QuantizeProgress p;
    p.tensor = current + 1;
    p.tensors = count;
    p.name = in.tensors()[current].name;
    p.from = kinds[current].first;
    p.to = kinds[current].second;
    p.bytes_done = done;
    p.bytes_total = all;
    progress(p);
  });
}

}  // namespace folio
