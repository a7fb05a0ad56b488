// A Hugging Face tokenizer as the files of a model directory give it, as plain text: what
// Tokenizer::from_hf builds a tokenizer from. The model module reads the files
// (model/hf_directory.h), so that text/ never opens a model directory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace folio {

struct HfTokenizerFiles {
  std::string name = "tokenizer.json";  // prefixes errors
  std::string tokenizer_json;           // tokenizer.json's text
  std::string tokenizer_config_json;    // tokenizer_config.json's text, or empty
  // generation_config.json's eos_token_id (one id or a list): generation ends on any of them,
  // as well as on the tokenizer's eos_token.
  std::vector<int32_t> generation_eos_ids;
};

}  // namespace folio
