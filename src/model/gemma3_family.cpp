// Gemma 3: local layers (sliding-window attention, RoPE base 10000) with a global layer every
// sliding_window_pattern layers (the whole context, the model's own base and scaling), q and k
// RMS-normed per head, RMS norms on both sides of attention and of the MLP, a tanh-GELU gated
// MLP, and embeddings scaled by sqrt(hidden). GGUF norms hold Gemma's (1 + weight) already:
// llama.cpp's converter adds the one, so the recipe's plain rms_norm * weight is Gemma's norm.
#include <cmath>

#include "model/architecture.h"

namespace folio {

Architecture describe_gemma3_family(const ModelConfig& config) {
  Architecture arch;
  arch.family = "gemma3";
  arch.layers.resize(static_cast<size_t>(config.num_layers));
  for (int32_t l = 0; l < config.num_layers; ++l) {
    LayerSpec& layer = arch.layers[static_cast<size_t>(l)];
    if (config.layer_window(l) == 0) {
      layer.rope = RopeSpec{config.rope_style, config.rope_dim, config.rope_freq_base, config.rope_position_scale};
    } else {
      layer.rope = RopeSpec{config.rope_style, config.rope_dim, config.rope_local_freq_base, 1.0f};
      layer.sliding_window = config.layer_window(l);
    }
  }
  // Gemma scales queries by query_pre_attn_scalar^-1/2. A Hugging Face config gives it; a GGUF
  // does not, and it is head_dim for every Gemma 3 but the 27B (62 layers: hidden / heads), as
  // llama.cpp and transformers' configs have it.
  const float scalar = config.query_pre_attn_scalar > 0.0f ? config.query_pre_attn_scalar
                       : config.num_layers == 62           ? static_cast<float>(config.hidden_dim) / config.num_heads
                                                           : static_cast<float>(config.head_dim);
  arch.attention_scale = 1.0f / std::sqrt(scalar);
  arch.embedding_scale = std::sqrt(static_cast<float>(config.hidden_dim));
  arch.activation = Activation::kGeGluTanh;
  arch.qk_norm = true;
  arch.post_norms = true;
  return arch;
}

}  // namespace folio
