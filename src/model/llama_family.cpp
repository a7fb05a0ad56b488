// The Llama family (Llama 2/3, SmolLM2, Mistral, Qwen2): pre-norm RMSNorm blocks, rotary
// attention with grouped KV heads, a SwiGLU MLP. Their differences are data: Qwen2's rotate-half
// RoPE and QKV bias, Llama-3's frequency factors, linear RoPE scaling; all of them are in the
// config and the weights, so one description serves the whole family.
#include <cmath>

#include "model/architecture.h"

namespace folio {

Architecture describe_llama_family(const ModelConfig& config) {
  Architecture arch;
  arch.family = "llama";
  LayerSpec layer;
  layer.rope = RopeSpec{config.rope_style, config.rope_dim, config.rope_freq_base, config.rope_position_scale};
  arch.layers.assign(static_cast<size_t>(config.num_layers), layer);
  arch.attention_scale = 1.0f / std::sqrt(static_cast<float>(config.head_dim));
  if (config.attention_factor != 1.0f) arch.attention_scale *= config.attention_factor;
  return arch;
}

Expected<Architecture> describe_architecture(const ModelConfig& config) {
  if (config.architecture == "llama" || config.architecture == "mistral" || config.architecture == "qwen2") {
    return describe_llama_family(config);
  }
  if (config.architecture == "gemma3") return describe_gemma3_family(config);
  return Status::error("model: architecture '" + config.architecture + "' is not supported");
}

}  // namespace folio
