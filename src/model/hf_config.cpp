#include "model/hf_config.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/rope_scaling.h"

namespace folio {
namespace {

using nlohmann::json;

struct Reader {
  const json& j;
  const std::string& where;

  Status error(const std::string& message) const { return Status::error(where + ": " + message); }

  // A required positive integer field.
  Status positive(const char* key, int32_t& out) const {
    const auto it = j.find(key);
    if (it == j.end()) return error("'" + std::string(key) + "' is missing");
    if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > (int64_t{1} << 30)) {
      return error("'" + std::string(key) + "' must be a positive integer, got " + it->dump());
    }
    out = static_cast<int32_t>(it->get<int64_t>());
    return Status::ok();
  }
  // An optional positive integer field (null counts as absent).
  Status optional_positive(const char* key, int32_t& out) const {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return Status::ok();
    return positive(key, out);
  }
  Status number(const json& object, const char* key, double& out, bool required = false) const {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) {
      return required ? error("'" + std::string(key) + "' is missing") : Status::ok();
    }
    if (!it->is_number()) return error("'" + std::string(key) + "' must be a number, got " + it->dump());
    out = it->get<double>();
    return Status::ok();
  }
  Status boolean(const char* key, bool& out) const {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return Status::ok();
    if (!it->is_boolean()) return error("'" + std::string(key) + "' must be true or false, got " + it->dump());
    out = it->get<bool>();
    return Status::ok();
  }
};

// One RoPE description: a rope_scaling object (transformers 4) or rope_parameters (transformers
// 5, which also holds rope_theta there), named `key` in messages.
Status read_rope_object(const Reader& r, const json& s, const std::string& key, HfModelConfig& out) {
  if (s.contains("rope_theta")) {
    double theta = 0.0;
    if (Status st = r.number(s, "rope_theta", theta); !st) return st;
    if (!(theta > 1.0)) return r.error("rope_theta must be > 1");
    out.config.rope_freq_base = static_cast<float>(theta);
  }
  std::string type;
  for (const char* key : {"rope_type", "type"}) {
    if (s.contains(key) && s[key].is_string()) type = s[key].get<std::string>();
  }
  if (type.empty()) return r.error("'" + key + "' names no rope_type");
  ModelConfig& c = out.config;
  double factor = 1.0;
  if (Status st = r.number(s, "factor", factor, type != "default"); !st) return st;
  if (!(factor > 0.0)) return r.error("rope_scaling 'factor' must be positive");
  if (type == "default") return Status::ok();
  if (type == "linear") {
    c.rope_position_scale = static_cast<float>(1.0 / factor);
    return Status::ok();
  }
  if (type == "llama3") {
    Llama3RopeScaling l;
    l.factor = factor;
    if (Status st = r.number(s, "low_freq_factor", l.low_freq_factor, true); !st) return st;
    if (Status st = r.number(s, "high_freq_factor", l.high_freq_factor, true); !st) return st;
    if (Status st = r.number(s, "original_max_position_embeddings", l.original_max_position_embeddings, true); !st) {
      return st;
    }
    out.rope_freq_factors = llama3_rope_freq_factors(c.rope_dim, c.rope_freq_base, l);
    return Status::ok();
  }
  if (type == "yarn") {
    YarnRopeScaling y;
    y.factor = factor;
    y.original_max_position_embeddings = c.context_length;
    if (Status st = r.number(s, "original_max_position_embeddings", y.original_max_position_embeddings); !st) return st;
    if (Status st = r.number(s, "beta_fast", y.beta_fast); !st) return st;
    if (Status st = r.number(s, "beta_slow", y.beta_slow); !st) return st;
    if (Status st = r.number(s, "attention_factor", y.attention_factor); !st) return st;
    for (const char* unsupported : {"mscale", "mscale_all_dim"}) {
      if (s.contains(unsupported)) return r.error("rope_scaling '" + std::string(unsupported) + "' is not supported");
    }
    if (c.rope_dim != c.head_dim) return r.error("YaRN with a partial rotary dimension is not supported");
    out.rope_freq_factors = yarn_rope_freq_factors(c.rope_dim, c.rope_freq_base, y);
    // cos and sin scaled by the factor on both q and k: the softmax scale by its square.
    c.attention_factor = static_cast<float>(std::pow(yarn_attention_factor(y), 2.0));
    return Status::ok();
  }
  return r.error("rope_scaling type '" + type + "' is not supported (folio implements linear, llama3 and yarn)");
}

// rope_scaling (transformers 4) or rope_parameters (transformers 5).
Status read_rope_scaling(const Reader& r, HfModelConfig& out) {
  auto it = r.j.find("rope_parameters");
  const char* key = "rope_parameters";
  if (it == r.j.end() || it->is_null()) {
    it = r.j.find("rope_scaling");
    key = "rope_scaling";
  }
  if (it == r.j.end() || it->is_null()) return Status::ok();
  if (!it->is_object()) return r.error("'" + std::string(key) + "' must be an object or null, got " + it->dump());
  return read_rope_object(r, *it, key, out);
}

// Gemma 3's fields (Gemma3ForCausalLM, transformers 4 and 5 spellings): which layers slide
// (layer_types, or every sliding_window_pattern-th layer global), the window, the two RoPE
// bases (transformers 5 nests them per layer type in rope_parameters; 4 has rope_theta and
// rope_local_base_freq, with rope_scaling for the global layers), the query scale, and the
// features of other Gemmas that folio refuses rather than ignores.
Status read_gemma3(const Reader& r, HfModelConfig& out) {
  ModelConfig& c = out.config;
  const json& j = r.j;
  c.rope_style = RopeStyle::kHalves;  // Gemma rotates halves; nothing permutes its Q and K
  if (j.contains("hidden_activation") && j["hidden_activation"] != "gelu_pytorch_tanh") {
    return r.error("hidden_activation " + j["hidden_activation"].dump() +
                   " is not supported (folio's Gemma 3 MLP is GELU, tanh approximation: gelu_pytorch_tanh)");
  }
  for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"}) {
    if (j.contains(key) && !j[key].is_null()) {
      return r.error(std::string(key) + " " + j[key].dump() + " is not supported (Gemma 3 has none; Gemma 2 does)");
    }
  }
  bool bidirectional = false;
  if (Status s = r.boolean("use_bidirectional_attention", bidirectional); !s) return s;
  if (bidirectional) return r.error("use_bidirectional_attention true is not supported (folio's attention is causal)");
  if (Status s = r.positive("sliding_window", c.sliding_window); !s) return s;
  c.sliding_window_pattern = 6;
  for (const char* key : {"sliding_window_pattern", "_sliding_window_pattern"}) {
    if (Status s = r.optional_positive(key, c.sliding_window_pattern); !s) return s;
  }
  if (const auto types = j.find("layer_types"); types != j.end() && !types->is_null()) {
    if (!types->is_array() || static_cast<int32_t>(types->size()) != c.num_layers) {
      return r.error("'layer_types' must list one type per layer (" + std::to_string(c.num_layers) + ")");
    }
    // folio describes the layers by a period: global layers at pattern - 1, 2 * pattern - 1, ...
    int32_t first_global = 0;
    while (first_global < c.num_layers && (*types)[static_cast<size_t>(first_global)] != "full_attention") {
      ++first_global;
    }
    c.sliding_window_pattern = first_global + 1;
    for (int32_t l = 0; l < c.num_layers; ++l) {
      const json& type = (*types)[static_cast<size_t>(l)];
      if (type != "full_attention" && type != "sliding_attention") {
        return r.error("layer_types[" + std::to_string(l) + "] " + type.dump() +
                       " is not supported (full_attention, sliding_attention)");
      }
      if ((type == "full_attention") != (c.layer_window(l) == 0)) {
        return r.error("'layer_types' has global layers at no fixed period, which folio does not run");
      }
    }
  }
  double local_base = 10000.0;
  if (Status s = r.number(j, "rope_local_base_freq", local_base); !s) return s;
  const auto nested = j.find("rope_parameters");
  if (nested != j.end() && nested->is_object() && nested->contains("full_attention")) {
    const json& full = (*nested)["full_attention"];
    const json* local = nested->contains("sliding_attention") ? &(*nested)["sliding_attention"] : nullptr;
    if (!full.is_object() || (local != nullptr && !local->is_object())) {
      return r.error("'rope_parameters' per layer type must hold objects");
    }
    if (Status s = read_rope_object(r, full, "rope_parameters.full_attention", out); !s) return s;
    if (local != nullptr) {
      if (Status s = r.number(*local, "rope_theta", local_base); !s) return s;
      if (local->contains("rope_type") && (*local)["rope_type"] != "default") {
        return r.error("rope_parameters.sliding_attention: rope_type " + (*local)["rope_type"].dump() +
                       " is not supported for the local layers (default only)");
      }
    }
  } else if (Status s = read_rope_scaling(r, out); !s) {
    return s;
  }
  // Gemma 3 scales its global layers linearly (4B and up); frequency factors (llama3, yarn)
  // would reach the local layers too, which the family does not describe.
  if (!out.rope_freq_factors.empty() || c.attention_factor != 1.0f) {
    return r.error("Gemma 3 with llama3 or yarn RoPE scaling is not supported (default and linear are)");
  }
  if (!(local_base > 1.0)) return r.error("the local layers' RoPE base must be > 1");
  c.rope_local_freq_base = static_cast<float>(local_base);
  double scalar = c.head_dim;
  if (Status s = r.number(j, "query_pre_attn_scalar", scalar); !s) return s;
  if (!(scalar > 0.0)) return r.error("query_pre_attn_scalar must be positive");
  c.query_pre_attn_scalar = static_cast<float>(scalar);
  if (out.attention_bias) return r.error("attention_bias true is not supported for Gemma 3");
  return Status::ok();
}

}  // namespace

static Expected<HfModelConfig> parse_hf_config_unchecked(const std::string& json_text, const std::string& name,
                                                         const std::string& dir) {
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status::error(name + ": not a JSON object");
  const Reader r{j, name};
  HfModelConfig out;
  ModelConfig& c = out.config;

  const auto archs = j.find("architectures");
  if (archs == j.end() || !archs->is_array() || archs->size() != 1 || !(*archs)[0].is_string()) {
    return r.error("'architectures' must list one architecture");
  }
  out.hf_architecture = (*archs)[0].get<std::string>();
  if (out.hf_architecture == "LlamaForCausalLM") {
    c.architecture = "llama";
  } else if (out.hf_architecture == "MistralForCausalLM") {
    c.architecture = "mistral";
  } else if (out.hf_architecture == "Qwen2ForCausalLM") {
    c.architecture = "qwen2";
  } else if (out.hf_architecture == "Gemma3ForCausalLM") {
    c.architecture = "gemma3";
  } else if (out.hf_architecture == "Gemma3ForConditionalGeneration") {
    return r.error(
        "architecture 'Gemma3ForConditionalGeneration' (the multimodal Gemma 3, 4B and up) is not "
        "supported yet: folio runs the text-only Gemma3ForCausalLM");
  } else {
    return r.error("architecture '" + out.hf_architecture +
                   "' is not supported (folio runs LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
                   "Gemma3ForCausalLM)");
  }
  const bool gemma = c.architecture == "gemma3";
  c.name = j.value("_name_or_path", out.hf_architecture);
  if (c.name.empty()) c.name = out.hf_architecture;
  for (const Status& s :
       {r.positive("num_hidden_layers", c.num_layers), r.positive("hidden_size", c.hidden_dim),
        r.positive("intermediate_size", c.ffn_dim), r.positive("num_attention_heads", c.num_heads),
        r.positive("vocab_size", c.vocab_size), r.positive("max_position_embeddings", c.context_length)}) {
    if (!s) return s;
  }
  c.num_kv_heads = c.num_heads;
  if (Status s = r.optional_positive("num_key_value_heads", c.num_kv_heads); !s) return s;
  if (c.num_heads % c.num_kv_heads != 0) {
    return r.error("num_attention_heads " + std::to_string(c.num_heads) + " is not a multiple of num_key_value_heads " +
                   std::to_string(c.num_kv_heads));
  }
  if (c.hidden_dim % c.num_heads != 0 && !j.contains("head_dim")) {
    return r.error("hidden_size is not a multiple of num_attention_heads and no head_dim is given");
  }
  c.head_dim = c.hidden_dim / c.num_heads;
  if (Status s = r.optional_positive("head_dim", c.head_dim); !s) return s;
  if (c.head_dim % 2 != 0) return r.error("head_dim " + std::to_string(c.head_dim) + " is odd");
  c.rope_dim = c.head_dim;
  double eps = 1e-6, theta = 10000.0;
  if (Status s = r.number(j, "rms_norm_eps", eps); !s) return s;
  if (Status s = r.number(j, "rope_theta", theta); !s) return s;
  if (!(eps > 0.0) || !(theta > 1.0)) return r.error("rms_norm_eps and rope_theta must be positive");
  c.rms_norm_eps = static_cast<float>(eps);
  c.rope_freq_base = static_cast<float>(theta);
  // GGUF's llama layout rotates adjacent pairs because llama.cpp's converter permutes Q and K;
  // folio's loader applies the same permutation to Hugging Face weights (hf_weights.cpp), so the
  // two formats compute in one order. Qwen2's GGUF keeps the halves layout, and so does folio.
  c.rope_style = c.architecture == "qwen2" ? RopeStyle::kHalves : RopeStyle::kAdjacentPairs;

  if (!gemma && j.contains("hidden_act") && j["hidden_act"] != "silu") {
    return r.error("hidden_act " + j["hidden_act"].dump() + " is not supported (folio's MLP is SwiGLU: silu)");
  }
  out.tie_word_embeddings = gemma;  // transformers' default for each
  if (Status s = r.boolean("tie_word_embeddings", out.tie_word_embeddings); !s) return s;
  out.attention_bias = c.architecture == "qwen2";
  if (Status s = r.boolean("attention_bias", out.attention_bias); !s) return s;
  if (j.contains("mlp_bias") && j["mlp_bias"] == true) return r.error("mlp_bias true is not supported");
  if (j.contains("pretraining_tp") && j["pretraining_tp"].is_number_integer() && j["pretraining_tp"] != 1) {
    return r.error("pretraining_tp " + j["pretraining_tp"].dump() + " is not supported");
  }
  // A sliding window shorter than the context changes attention past it; until folio has
  // sliding-window attention the context stops at the window, where both agree.
  bool use_sliding = c.architecture == "mistral";
  if (Status s = r.boolean("use_sliding_window", use_sliding); !s) return s;
  int32_t window = 0;
  if (use_sliding && !gemma) {
    if (Status s = r.optional_positive("sliding_window", window); !s) return s;
    if (window > 0 && window < c.context_length) c.context_length = window;
  }
  auto dtype = j.find("dtype");  // transformers 5; "torch_dtype" before
  if (dtype == j.end() || dtype->is_null()) dtype = j.find("torch_dtype");
  if (dtype != j.end() && !dtype->is_null()) {
    if (!dtype->is_string()) return r.error("'dtype' must be a string");
    out.torch_dtype = dtype->get<std::string>();
    if (out.torch_dtype != "bfloat16" && out.torch_dtype != "float16" && out.torch_dtype != "float32") {
      return r.error("dtype '" + out.torch_dtype + "' is not supported (bfloat16, float16, float32)");
    }
  }
  if (Status s = gemma ? read_gemma3(r, out) : read_rope_scaling(r, out); !s) return s;
  Expected<HfQuantization> quantization = read_hf_quantization(dir, json_text);
  if (!quantization) return quantization.status();
  out.quantization = *quantization;
  return out;
}

namespace {
Expected<HfModelConfig> parse_hf_config_in(const std::string& json_text, const std::string& name,
                                           const std::string& dir) {
  // nlohmann's typed reads (value(), get<>()) throw on a field of the wrong type; a bad file is an error, not a crash (found by fuzz/hf_tokenizer_fuzz.cpp).
  try {
    return parse_hf_config_unchecked(json_text, name, dir);
  } catch (const nlohmann::json::exception& e) {
    return Status::error(name + ": " + e.what());
  }
}
}  // namespace

Expected<HfModelConfig> parse_hf_config(const std::string& json_text, const std::string& name) {
  return parse_hf_config_in(json_text, name, "");
}

Expected<HfModelConfig> read_hf_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error("cannot read '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return parse_hf_config_in(text.str(), path, dir);
}

}  // namespace folio
