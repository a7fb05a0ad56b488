// What an architecture's layers are, as data: the description the transformer recipe
// (transformer_recipe.h) follows on every device. One family, one describing file
// (llama_family.cpp: Llama 2/3, SmolLM2, Mistral, Qwen2; gemma3_family.cpp: Gemma 3); adding a
// family means adding its file and teaching describe_architecture its name, not writing a
// forward pass per device.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "model/model_config.h"
#include "model/rope.h"

namespace folio {

// One layer as the recipe runs it:
//   x += attention(rope(qkv(rms_norm(x))))      (QKV bias where the weights carry one)
//   x += down(silu(gate(rms_norm(x))) * up(...))
// and Gemma's variations: q and k RMS-normed per head before RoPE (qk_norm), the attention's
// and the MLP's outputs RMS-normed before they join the residual stream (post_norms), GELU
// instead of SiLU, and local layers that see only the last sliding_window tokens.
struct LayerSpec {
  RopeSpec rope;
  int32_t sliding_window = 0;  // 0: the whole context
};

enum class Activation {
  kSwiGlu,     // silu(gate) * up
  kGeGluTanh,  // gelu(gate) * up, GELU's tanh approximation
};

struct Architecture {
  std::string family;             // "llama" for every Llama-shaped model folio runs; "gemma3"
  std::vector<LayerSpec> layers;  // (num_layers,)
  float attention_scale = 1.0f;   // softmax scale: 1 / sqrt(head_dim)
  float embedding_scale = 1.0f;   // the embedding rows are multiplied by this (Gemma: sqrt(hidden))
  Activation activation = Activation::kSwiGlu;
  bool qk_norm = false;
  bool post_norms = false;

  // Whether some layer attends to a window rather than the whole context.
  bool has_sliding_window() const {
    for (const LayerSpec& l : layers) {
      if (l.sliding_window > 0) return true;
    }
    return false;
  }

  int32_t num_layers() const { return static_cast<int32_t>(layers.size()); }
};

// The description of the model config.architecture names; an error for one folio cannot run.
Expected<Architecture> describe_architecture(const ModelConfig& config);

// Llama, Mistral, SmolLM2, Qwen2 (llama_family.cpp).
Architecture describe_llama_family(const ModelConfig& config);
// Gemma 3 (gemma3_family.cpp).
Architecture describe_gemma3_family(const ModelConfig& config);

}  // namespace folio
