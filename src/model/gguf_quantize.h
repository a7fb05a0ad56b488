// `folio quantize` for GGUF files: every weight matrix of an F32 / F16 / BF16 GGUF re-encoded in
// a GGUF block type (quant/quantize_search.h), the metadata and the 1-D tensors copied as they
// are. The mixed recipes follow the rule the GGUF ecosystem's Q4_K_M / Q5_K_M files follow (so
// that folio's files are comparable with theirs): the vocabulary projection (or the tied
// embedding) and attn_v / ffn_down of the first eighth, the last eighth and every third layer in
// between in Q6_K, the rest in the base type. K-quants need rows of a multiple of 256; other
// rows take the nearest 32-element type with at least as many bits (Q4_K -> Q5_0, Q5_K -> Q5_1,
// Q6_K -> Q8_0).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "model/gguf_file.h"

namespace folio {

struct QuantizeRecipe {
  std::string name;  // "q4_k_m", ...
  DType base = DType::Q8_0;
  bool mixed = false;      // the _M recipes
  uint32_t file_type = 0;  // general.file_type (llama.cpp's ftype numbering, which readers show)
};

// q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, q4_k_m, q5_k_m, and f32 / f16 / bf16 (which
// also decode quantized files); an error names them.
Expected<QuantizeRecipe> quantize_recipe(std::string_view name);
std::vector<std::string> quantize_recipe_names();

// The type tensor `name` (its rows `cols` wide) gets under the recipe: 1-D tensors and norms
// keep theirs (nullopt: copied as is).
std::optional<DType> quantized_type(const QuantizeRecipe& recipe, const GgufTensorInfo& tensor, int32_t num_layers);

struct QuantizeProgress {
  size_t tensor = 0, tensors = 0;  // the one being written, 1-based
  std::string name;
  DType from = DType::F32, to = DType::F32;
  uint64_t bytes_done = 0, bytes_total = 0;  // of the output's tensor data
};

// Writes `out` (an error, and no file, when a block type is asked of weights already
// block-quantized, or the output cannot be written). The caller picks the path (the CLI writes a temporary name and
// renames it on success).
// importance(tensor name): per input feature (the tensor's row width), the weights of the
// quantizer's error (an importance matrix); empty: none for that tensor.
using ImportanceFn = std::function<std::vector<float>(const std::string&)>;
Status quantize_gguf(const GgufFile& in, const std::string& out, const QuantizeRecipe& recipe,
                     const std::function<void(const QuantizeProgress&)>& progress = {},
                     const ImportanceFn& importance = {});

}  // namespace folio
