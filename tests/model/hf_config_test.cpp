// config.json and generation_config.json as transformers 4 and 5 write them, and every value
// folio does not implement refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "model/hf_config.h"
#include "model/hf_directory.h"
#include "model/rope_scaling.h"

namespace folio {
namespace {

std::string llama(const std::string& extra) {
  return R"({"architectures":["LlamaForCausalLM"],"hidden_size":256,"intermediate_size":512,
    "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":1000,
    "max_position_embeddings":4096,"rms_norm_eps":1e-5,"hidden_act":"silu")" +
         extra + "}";
}

// A field of the wrong type is an error naming the file, not an exception out of the loader.
TEST(HfConfig, FieldsOfTheWrongTypeAreErrors) {
  Expected<HfModelConfig> c = parse_hf_config(llama(R"(,"_name_or_path":5)"), "dir/config.json");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().find("dir/config.json"), std::string::npos) << c.error();
}

TEST(HfConfig, ReadsTransformers4Llama3) {
  Expected<HfModelConfig> c = parse_hf_config(llama(R"(,"rope_theta":500000.0,"torch_dtype":"bfloat16",
    "rope_scaling":{"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,
    "original_max_position_embeddings":8192},"tie_word_embeddings":false)"));
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->config.architecture, "llama");
  EXPECT_EQ(c->config.head_dim, 64);
  EXPECT_EQ(c->config.num_kv_heads, 2);
  EXPECT_FLOAT_EQ(c->config.rope_freq_base, 500000.0f);
  EXPECT_EQ(c->torch_dtype, "bfloat16");
  EXPECT_EQ(c->config.rope_style, RopeStyle::kAdjacentPairs);
  const std::vector<float> expected = llama3_rope_freq_factors(64, 500000.0f);
  EXPECT_EQ(c->rope_freq_factors, expected);
  EXPECT_FLOAT_EQ(c->rope_freq_factors.front(), 1.0f);  // short wavelengths kept
  EXPECT_FLOAT_EQ(c->rope_freq_factors.back(), 8.0f);   // long ones divided by the factor
}

TEST(HfConfig, ReadsTransformers5RopeParameters) {
  Expected<HfModelConfig> c = parse_hf_config(
      llama(R"(,"dtype":"float32","rope_parameters":{"rope_type":"linear","rope_theta":12345.0,"factor":4.0})"));
  ASSERT_TRUE(c) << c.error();
  EXPECT_FLOAT_EQ(c->config.rope_freq_base, 12345.0f);
  EXPECT_FLOAT_EQ(c->config.rope_position_scale, 0.25f);
  EXPECT_EQ(c->torch_dtype, "float32");
  Expected<HfModelConfig> d = parse_hf_config(llama(R"(,"rope_parameters":{"rope_type":"default","rope_theta":1e4})"));
  ASSERT_TRUE(d) << d.error();
  EXPECT_TRUE(d->rope_freq_factors.empty());
}

TEST(HfConfig, ReadsQwen2AndMistral) {
  Expected<HfModelConfig> q = parse_hf_config(R"({"architectures":["Qwen2ForCausalLM"],"hidden_size":128,
    "intermediate_size":256,"num_hidden_layers":1,"num_attention_heads":2,"num_key_value_heads":1,
    "vocab_size":500,"max_position_embeddings":32768,"tie_word_embeddings":true,"sliding_window":4096,
    "use_sliding_window":false})");
  ASSERT_TRUE(q) << q.error();
  EXPECT_TRUE(q->attention_bias);
  EXPECT_TRUE(q->tie_word_embeddings);
  EXPECT_EQ(q->config.rope_style, RopeStyle::kHalves);
  EXPECT_EQ(q->config.context_length, 32768);  // the window is off
  Expected<HfModelConfig> m = parse_hf_config(R"({"architectures":["MistralForCausalLM"],"hidden_size":128,
    "intermediate_size":256,"num_hidden_layers":1,"num_attention_heads":2,"vocab_size":500,"head_dim":32,
    "max_position_embeddings":32768,"sliding_window":4096})");
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->config.head_dim, 32);
  EXPECT_EQ(m->config.context_length, 4096);  // served up to the window, where both agree
}

TEST(HfConfig, YarnScalesFrequenciesAndAttention) {
  Expected<HfModelConfig> c = parse_hf_config(llama(R"(,"rope_scaling":{"type":"yarn","factor":4.0,
    "original_max_position_embeddings":1024})"));
  ASSERT_TRUE(c) << c.error();
  ASSERT_EQ(c->rope_freq_factors.size(), 32u);
  EXPECT_FLOAT_EQ(c->rope_freq_factors.front(), 1.0f);  // fast dimensions extrapolate
  EXPECT_FLOAT_EQ(c->rope_freq_factors.back(), 4.0f);   // slow ones interpolate
  const double mscale = 0.1 * std::log(4.0) + 1.0;
  EXPECT_NEAR(c->config.attention_factor, mscale * mscale, 1e-6);
}

TEST(HfConfig, RefusesWhatItDoesNotImplementByName) {
  const std::pair<std::string, const char*> cases[] = {
      {R"({"architectures":["GPTNeoXForCausalLM"]})", "GPTNeoXForCausalLM"},
      {R"({"architectures":[]})", "one architecture"},
      {llama(R"(,"rope_scaling":{"rope_type":"longrope","factor":2.0})"), "longrope"},
      {llama(R"(,"rope_scaling":{"rope_type":"llama3","factor":8.0})"), "low_freq_factor"},
      {llama(R"(,"rope_scaling":{"rope_type":"yarn","factor":2.0,"mscale":1.0})"), "mscale"},
      {llama(R"(,"hidden_act":"gelu")"), "hidden_act"},
      {llama(R"(,"torch_dtype":"int8")"), "int8"},
      {llama(R"(,"num_key_value_heads":3)"), "not a multiple"},
      {llama(R"(,"mlp_bias":true)"), "mlp_bias"},
      {llama(R"(,"pretraining_tp":2)"), "pretraining_tp"},
      {R"({"architectures":["LlamaForCausalLM"],"hidden_size":256})", "num_hidden_layers"},
      {llama(R"(,"vocab_size":-1)"), "vocab_size"},
      {"not json", "not a JSON object"},
  };
  for (const auto& [text, message] : cases) {
    Expected<HfModelConfig> c = parse_hf_config(text);
    ASSERT_FALSE(c) << text;
    EXPECT_NE(c.error().find(message), std::string::npos) << text << "\n  -> " << c.error();
  }
}

TEST(HfGenerationConfig, ReadsEosListsAndSamplingDefaults) {
  Expected<HfGenerationConfig> g = parse_hf_generation_config(
      R"({"eos_token_id":[128001,128008,128009],"temperature":0.6,"top_p":0.9,"do_sample":true})");
  ASSERT_TRUE(g) << g.error();
  EXPECT_EQ(g->eos_token_ids, (std::vector<int32_t>{128001, 128008, 128009}));
  EXPECT_FLOAT_EQ(*g->temperature, 0.6f);
  EXPECT_FLOAT_EQ(*g->top_p, 0.9f);
  EXPECT_FALSE(g->top_k);
  Expected<HfGenerationConfig> one = parse_hf_generation_config(R"({"eos_token_id":2,"top_k":50})");
  ASSERT_TRUE(one) << one.error();
  EXPECT_EQ(one->eos_token_ids, (std::vector<int32_t>{2}));
  EXPECT_EQ(*one->top_k, 50);
  EXPECT_FALSE(parse_hf_generation_config(R"({"eos_token_id":"x"})"));
  EXPECT_FALSE(parse_hf_generation_config(R"({"temperature":"hot"})"));
}

TEST(HfDirectory, ChatTemplateFromJinjaFileOrConfig) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "folio_hf_directory_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto write = [&](const char* name, const std::string& text) { std::ofstream(dir / name) << text; };
  write("config.json", llama(""));
  write("tokenizer.json", "{}");
  write("tokenizer_config.json",
        R"({"chat_template":[{"name":"tool_use","template":"T"},{"name":"default","template":"D"}]})");
  Expected<HfDirectory> d = read_hf_directory(dir.string());
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->chat_template, "D");
  write("chat_template.jinja", "J");
  d = read_hf_directory(dir.string());
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->chat_template, "J");  // the file wins, as in transformers
  write("generation_config.json", R"({"eos_token_id":[5,6]})");
  d = read_hf_directory(dir.string());
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->tokenizer.generation_eos_ids, (std::vector<int32_t>{5, 6}));
  std::filesystem::remove(dir / "tokenizer.json");
  EXPECT_FALSE(read_hf_directory(dir.string()));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace folio
