// Gemma 3's config.json as transformers 4 and 5 write it (Gemma3ForCausalLM): the window and
// which layers slide, the two RoPE bases, the query scale, and what folio refuses by name.
#include <gtest/gtest.h>

#include <cmath>

#include "model/architecture.h"
#include "model/hf_config.h"

namespace folio {
namespace {

// google/gemma-3-270m's config.json as transformers 4.55 wrote it (layer_types elided: 4 wrote
// both it and the pattern).
std::string transformers4(const std::string& extra = "") {
  return R"({"_sliding_window_pattern":6,"architectures":["Gemma3ForCausalLM"],"attention_bias":false,
    "attn_logit_softcapping":null,"bos_token_id":2,"eos_token_id":1,"final_logit_softcapping":null,
    "head_dim":256,"hidden_activation":"gelu_pytorch_tanh","hidden_size":640,"intermediate_size":2048,
    "max_position_embeddings":32768,"model_type":"gemma3_text","num_attention_heads":4,
    "num_hidden_layers":18,"num_key_value_heads":1,"pad_token_id":0,"query_pre_attn_scalar":256,
    "rms_norm_eps":1e-06,"rope_local_base_freq":10000.0,"rope_scaling":null,"rope_theta":1000000.0,
    "sliding_window":512,"torch_dtype":"bfloat16","use_bidirectional_attention":false,
    "vocab_size":262144)" +
         extra + "}";
}

// A transformers 5 config: rope_parameters per layer type, layer_types listed.
std::string transformers5(const std::string& layer_types, const std::string& rope, const std::string& extra = "") {
  return R"({"architectures":["Gemma3ForCausalLM"],"head_dim":16,"hidden_activation":"gelu_pytorch_tanh",
    "hidden_size":64,"intermediate_size":160,"max_position_embeddings":256,"num_attention_heads":4,
    "num_hidden_layers":6,"num_key_value_heads":2,"query_pre_attn_scalar":24,"rms_norm_eps":1e-06,
    "sliding_window":8,"vocab_size":320,"layer_types":)" +
         layer_types + R"(,"rope_parameters":)" + rope + extra + "}";
}

const char* kPeriod3 =
    R"(["sliding_attention","sliding_attention","full_attention","sliding_attention","sliding_attention","full_attention"])";
const char* kRope =
    R"({"full_attention":{"rope_type":"linear","factor":8.0,"rope_theta":1000000.0},"sliding_attention":{"rope_type":"default","rope_theta":10000.0}})";

TEST(HfGemma3Config, ReadsTransformers4) {
  Expected<HfModelConfig> c = parse_hf_config(transformers4());
  ASSERT_TRUE(c) << c.error();
  const ModelConfig& m = c->config;
  EXPECT_EQ(m.architecture, "gemma3");
  EXPECT_EQ(m.head_dim, 256);
  EXPECT_EQ(m.num_kv_heads, 1);
  EXPECT_EQ(m.rope_style, RopeStyle::kHalves);
  EXPECT_FLOAT_EQ(m.rope_freq_base, 1e6f);
  EXPECT_FLOAT_EQ(m.rope_local_freq_base, 1e4f);
  EXPECT_FLOAT_EQ(m.rope_position_scale, 1.0f);
  EXPECT_TRUE(c->tie_word_embeddings);  // Gemma's default
  EXPECT_EQ(m.context_length, 32768);   // the window does not cut the context (unlike Mistral's)
  for (int32_t l = 0; l < 18; ++l) EXPECT_EQ(m.layer_window(l), l % 6 == 5 ? 0 : 512) << l;
  Expected<Architecture> arch = describe_architecture(m);
  ASSERT_TRUE(arch) << arch.error();
  EXPECT_FLOAT_EQ(arch->attention_scale, 1.0f / 16.0f);
  EXPECT_FLOAT_EQ(arch->embedding_scale, std::sqrt(640.0f));
  EXPECT_FLOAT_EQ(arch->layers[0].rope.freq_base, 1e4f);
  EXPECT_FLOAT_EQ(arch->layers[5].rope.freq_base, 1e6f);
}

TEST(HfGemma3Config, ReadsTransformers5RopePerLayerType) {
  Expected<HfModelConfig> c = parse_hf_config(transformers5(kPeriod3, kRope));
  ASSERT_TRUE(c) << c.error();
  const ModelConfig& m = c->config;
  EXPECT_EQ(m.sliding_window_pattern, 3);
  for (int32_t l = 0; l < 6; ++l) EXPECT_EQ(m.layer_window(l), l % 3 == 2 ? 0 : 8) << l;
  EXPECT_FLOAT_EQ(m.rope_freq_base, 1e6f);
  EXPECT_FLOAT_EQ(m.rope_local_freq_base, 1e4f);
  EXPECT_FLOAT_EQ(m.rope_position_scale, 0.125f);
  Expected<Architecture> arch = describe_architecture(m);
  ASSERT_TRUE(arch) << arch.error();
  // query_pre_attn_scalar, not head_dim, sets the query scale (Gemma 3 27B: 168 against 128).
  EXPECT_FLOAT_EQ(arch->attention_scale, 1.0f / std::sqrt(24.0f));
  // Linear scaling is the global layers' alone.
  EXPECT_FLOAT_EQ(arch->layers[2].rope.position_scale, 0.125f);
  EXPECT_FLOAT_EQ(arch->layers[0].rope.position_scale, 1.0f);
}

TEST(HfGemma3Config, RefusesWhatItDoesNotRun) {
  auto error_of = [](const std::string& json) {
    Expected<HfModelConfig> c = parse_hf_config(json);
    return c ? std::string() : c.error();
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {transformers4(R"(,"final_logit_softcapping":30.0)"), "final_logit_softcapping"},
      {transformers4(R"(,"attn_logit_softcapping":50.0)"), "attn_logit_softcapping"},
      {transformers4(R"(,"hidden_activation":"silu")"), "hidden_activation"},
      {transformers4(R"(,"use_bidirectional_attention":true)"), "use_bidirectional_attention"},
      {transformers4(R"(,"attention_bias":true)"), "attention_bias"},
      {transformers4(R"(,"sliding_window":null)"), "sliding_window"},
      {transformers4(R"(,"rope_scaling":{"rope_type":"yarn","factor":4.0})"), "yarn"},
      {transformers5(
           R"(["sliding_attention","full_attention","full_attention","sliding_attention","sliding_attention","full_attention"])",
           kRope),
       "no fixed period"},
      {transformers5(R"(["sliding_attention","full_attention"])", kRope), "one type per layer"},
      {transformers5(
           R"(["sliding_attention","sliding_attention","full_attention","sliding_attention","sliding_attention","chunked_attention"])",
           kRope),
       "chunked_attention"},
      {transformers5(
           kPeriod3,
           R"({"full_attention":{"rope_type":"default","rope_theta":1e6},"sliding_attention":{"rope_type":"linear","factor":2.0,"rope_theta":1e4}})"),
       "local layers"},
      {R"({"architectures":["Gemma3ForConditionalGeneration"]})", "Gemma3ForCausalLM"},
  };
  for (const auto& [json, needle] : cases) {
    const std::string error = error_of(json);
    EXPECT_NE(error.find(needle), std::string::npos)
        << "expected an error naming '" << needle << "', got '" << error << "'";
  }
}

}  // namespace
}  // namespace folio
