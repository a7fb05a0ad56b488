// Hyper-parameters of a model folio runs (the Llama family: Llama 2/3, SmolLM2, Mistral, Qwen2;
// Gemma 3), read from GGUF metadata under the "<architecture>." prefix, or from a Hugging Face
// config.json (hf_config.h).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "model/gguf_file.h"
#include "model/rope.h"

namespace folio {

struct ModelConfig {
  std::string architecture;  // "llama", "qwen2", ...
  std::string name;          // general.name, for display
  int32_t num_layers = 0;
  int32_t hidden_dim = 0;
  int32_t ffn_dim = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t vocab_size = 0;
  int32_t context_length = 0;  // trained context
  float rms_norm_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  float rope_position_scale = 1.0f;  // 1 / linear scaling factor
  int32_t rope_dim = 0;
  RopeStyle rope_style = RopeStyle::kAdjacentPairs;
  // Multiplies the softmax scale 1 / sqrt(head_dim): YaRN's attention factor, squared (it
  // scales both q and k).
  float attention_factor = 1.0f;
  // Gemma 3: the local layers attend to the last sliding_window tokens (0: every layer sees the
  // whole context); every sliding_window_pattern-th layer is global; the local layers rotate
  // with their own base.
  int32_t sliding_window = 0;
  int32_t sliding_window_pattern = 0;
  float rope_local_freq_base = 10000.0f;
  // Gemma: queries are scaled by query_pre_attn_scalar^-1/2 (0: the family's rule for GGUF
  // files, which do not carry it).
  float query_pre_attn_scalar = 0.0f;

  static Expected<ModelConfig> from_gguf(const GgufFile& file);
  int32_t q_dim() const { return num_heads * head_dim; }
  // The window layer l attends to (0: the whole context).
  int32_t layer_window(int32_t l) const {
    const bool global =
        sliding_window == 0 || sliding_window_pattern <= 1 || l % sliding_window_pattern == sliding_window_pattern - 1;
    return global ? 0 : sliding_window;
  }
  int32_t kv_dim() const { return num_kv_heads * head_dim; }
};

}  // namespace folio
