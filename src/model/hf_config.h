// A Hugging Face model directory's config.json, read into folio's ModelConfig for the
// architectures folio runs (LlamaForCausalLM with Llama-3 / linear / YaRN RoPE scaling,
// MistralForCausalLM, Qwen2ForCausalLM with its QKV bias), plus what the config says about the
// weights: tied embeddings, attention bias, RoPE frequency factors. An unknown architecture or a
// field value folio does not implement is an error naming it, never a silent default.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "model/hf_quantization.h"
#include "model/model_config.h"

namespace folio {

struct HfModelConfig {
  ModelConfig config;
  std::string hf_architecture;  // "LlamaForCausalLM", ...
  bool tie_word_embeddings = false;
  bool attention_bias = false;           // q/k/v (and for Llama o) projections carry biases
  std::vector<float> rope_freq_factors;  // (rope_dim / 2,) divisors, empty without scaling
  std::string torch_dtype;               // "bfloat16", "float16", "float32"
  HfQuantization quantization;           // AWQ / GPTQ 4-bit layers (hf_quantization.h), or none
};

// Reads <dir>/config.json (and the quantization side files beside it).
Expected<HfModelConfig> read_hf_config(const std::string& dir);
// The same from the file's text (tests): quantization_config only, no side files.
Expected<HfModelConfig> parse_hf_config(const std::string& json_text, const std::string& name = "config.json");

}  // namespace folio
