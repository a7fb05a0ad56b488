// What an architecture's layers are, as data: the description the transformer recipe
// (transformer_recipe.h) follows on every device. One family, one describing file
// (llama_family.cpp: Llama 2/3, SmolLM2, Mistral, Qwen2); adding a family means adding its file
// and teaching describe_architecture its name, not writing a forward pass per device.
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
struct LayerSpec {
  RopeSpec rope;
};

struct Architecture {
  std::string family;             // "llama" for every Llama-shaped model folio runs
  std::vector<LayerSpec> layers;  // (num_layers,)
  float attention_scale = 1.0f;   // softmax scale: 1 / sqrt(head_dim)

  int32_t num_layers() const { return static_cast<int32_t>(layers.size()); }
};

// The description of the model config.architecture names; an error for one folio cannot run.
Expected<Architecture> describe_architecture(const ModelConfig& config);

// Llama, Mistral, SmolLM2, Qwen2 (llama_family.cpp).
Architecture describe_llama_family(const ModelConfig& config);

}  // namespace folio
