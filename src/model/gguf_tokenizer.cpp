#include "model/gguf_tokenizer.h"

#include <array>
#include <string_view>

namespace folio {
namespace {

constexpr std::string_view kKeyPrefix = "tokenizer.ggml.";

std::string key(std::string_view name) {
  return std::string(kKeyPrefix).append(name);
}

}  // namespace

Expected<TokenizerMetadata> tokenizer_metadata_from_gguf(const GgufFile& file) {
  TokenizerMetadata m;
  const std::optional<std::string> model = file.get_string(key("model"));
  if (!model) return Status::error("GGUF file has no tokenizer.ggml.model");
  m.model = *model;
  m.pre = file.get_string(key("pre"));
  std::optional<std::vector<std::string>> tokens = file.get_string_array(key("tokens"));
  if (!tokens || tokens->empty()) return Status::error("GGUF file has no tokenizer.ggml.tokens string array");
  m.tokens = std::move(*tokens);
  if (file.find(key("scores"))) {
    m.scores = file.get_float_array(key("scores"));
    if (!m.scores) {  // llama.cpp also accepts integer scores
      if (auto ints = file.get_int_array(key("scores"))) m.scores.emplace(ints->begin(), ints->end());
    }
    if (!m.scores) return Status::error("tokenizer.ggml.scores must be a number array with one entry per token");
  }
  if (file.find(key("token_type"))) {
    m.token_types = file.get_int_array(key("token_type"));
    if (!m.token_types) {
      return Status::error("tokenizer.ggml.token_type must be an integer array with one entry per token");
    }
  }
  m.merges = file.get_string_array(key("merges"));
  static constexpr std::array<std::string_view, 15> kIdKeys = {
      "bos_token_id",     "eos_token_id",     "eot_token_id",     "eom_token_id",     "unknown_token_id",
      "padding_token_id", "fim_pre_token_id", "fim_suf_token_id", "fim_mid_token_id", "fim_pad_token_id",
      "fim_rep_token_id", "fim_sep_token_id", "prefix_token_id",  "suffix_token_id",  "middle_token_id"};
  for (const std::string_view name : kIdKeys) {
    if (const std::optional<int64_t> value = file.get_int(key(name))) m.ids.emplace(std::string(name), *value);
  }
  for (const std::string_view name : {"add_bos_token", "add_eos_token", "add_space_prefix"}) {
    if (const std::optional<bool> value = file.get_bool(key(name))) m.flags.emplace(std::string(name), *value);
  }
  return m;
}

Expected<Tokenizer> tokenizer_from_gguf(const GgufFile& file) {
  Expected<TokenizerMetadata> metadata = tokenizer_metadata_from_gguf(file);
  if (!metadata) return metadata.status();
  return Tokenizer::from_metadata(*metadata);
}

}  // namespace folio
