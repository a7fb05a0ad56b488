#include "model/model_config.h"

#include <string_view>

namespace folio {
namespace {

bool is_supported_architecture(std::string_view arch) {
  return arch == "llama" || arch == "qwen2" || arch == "mistral" || arch == "gemma3";
}

}  // namespace

Expected<ModelConfig> ModelConfig::from_gguf(const GgufFile& file) {
  ModelConfig config;
  const std::optional<std::string> arch = file.get_string("general.architecture");
  if (!arch) return Status::error("model: general.architecture is missing");
  if (!is_supported_architecture(*arch)) {
    return Status::error("model: architecture '" + *arch +
                         "' is not supported (supported: llama, mistral, qwen2, gemma3)");
  }
  config.architecture = *arch;
  config.name = file.get_string("general.name").value_or(*arch);
  const std::string prefix = *arch + ".";

  auto required_int = [&](std::string_view key, int32_t& out, int64_t min_value) -> Status {
    const std::optional<int64_t> value = file.get_int(prefix + std::string(key));
    if (!value) return Status::error("model: " + prefix + std::string(key) + " is missing");
    if (*value < min_value || *value > (int64_t{1} << 30)) {
      return Status::error("model: " + prefix + std::string(key) + " = " + std::to_string(*value) + " is out of range");
    }
    out = static_cast<int32_t>(*value);
    return Status::ok();
  };
  for (const Status& s :
       {required_int("block_count", config.num_layers, 1), required_int("embedding_length", config.hidden_dim, 1),
        required_int("feed_forward_length", config.ffn_dim, 1),
        required_int("attention.head_count", config.num_heads, 1),
        required_int("context_length", config.context_length, 1)}) {
    if (!s) return s;
  }
  config.num_kv_heads =
      static_cast<int32_t>(file.get_int(prefix + "attention.head_count_kv").value_or(config.num_heads));
  if (config.num_kv_heads < 1 || config.num_heads % config.num_kv_heads != 0) {
    return Status::error("model: head_count " + std::to_string(config.num_heads) +
                         " is not a multiple of head_count_kv " + std::to_string(config.num_kv_heads));
  }
  const std::optional<int64_t> key_length = file.get_int(prefix + "attention.key_length");
  if (!key_length && config.hidden_dim % config.num_heads != 0) {
    return Status::error("model: embedding_length is not a multiple of head_count");
  }
  if (key_length && (*key_length < 1 || *key_length > 4096)) {
    return Status::error("model: attention.key_length " + std::to_string(*key_length) + " is out of range");
  }
  config.head_dim = static_cast<int32_t>(key_length.value_or(config.hidden_dim / config.num_heads));
  config.rms_norm_eps = static_cast<float>(file.get_float(prefix + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  config.rope_freq_base = static_cast<float>(file.get_float(prefix + "rope.freq_base").value_or(10000.0));
  config.rope_dim = static_cast<int32_t>(file.get_int(prefix + "rope.dimension_count").value_or(config.head_dim));
  if (config.rope_dim <= 0 || config.rope_dim > config.head_dim || config.rope_dim % 2 != 0) {
    return Status::error("model: rope.dimension_count " + std::to_string(config.rope_dim) + " does not fit head size " +
                         std::to_string(config.head_dim));
  }
  const std::string scaling = file.get_string(prefix + "rope.scaling.type").value_or("none");
  if (scaling == "linear") {
    const double factor = file.get_float(prefix + "rope.scaling.factor").value_or(1.0);
    if (factor <= 0) return Status::error("model: rope.scaling.factor must be positive");
    config.rope_position_scale = static_cast<float>(1.0 / factor);
  } else if (scaling != "none" && scaling != "llama3") {
    // Llama-3 scaling arrives as the rope_freqs.weight tensor, read by the model loader.
    return Status::error("model: rope scaling '" + scaling + "' is not supported");
  }
  // Qwen2 and Gemma keep Hugging Face's rotate-half layout; llama-family GGUFs are permuted to
  // pairs.
  const bool halves = config.architecture == "qwen2" || config.architecture == "gemma3";
  config.rope_style = halves ? RopeStyle::kHalves : RopeStyle::kAdjacentPairs;
  if (config.architecture == "gemma3") {
    // llama.cpp's converter writes the window but neither the pattern nor the local base: Gemma 3
    // fixes them (five local layers, then a global one; local RoPE base 10000).
    config.sliding_window = static_cast<int32_t>(file.get_int(prefix + "attention.sliding_window").value_or(0));
    if (config.sliding_window < 0) return Status::error("model: attention.sliding_window must not be negative");
    config.sliding_window_pattern =
        static_cast<int32_t>(file.get_int(prefix + "attention.sliding_window_pattern").value_or(6));
    if (config.sliding_window_pattern < 1)
      return Status::error("model: attention.sliding_window_pattern must be positive");
    config.rope_local_freq_base = 10000.0f;
  }

  const std::optional<std::vector<std::string>> tokens = file.get_string_array("tokenizer.ggml.tokens");
  config.vocab_size = static_cast<int32_t>(
      file.get_int(prefix + "vocab_size").value_or(tokens ? static_cast<int64_t>(tokens->size()) : 0));
  if (config.vocab_size <= 0) return Status::error("model: vocabulary size is unknown");
  return config;
}

}  // namespace folio
