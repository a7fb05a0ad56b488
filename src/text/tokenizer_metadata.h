// A tokenizer as llama.cpp's tokenizer.ggml.* metadata describes it, as plain data: what
// Tokenizer::from_metadata builds a tokenizer from. The model module fills it from a GGUF file
// (model/gguf_tokenizer.h), so that text/ never sees a model file.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace folio {

struct TokenizerMetadata {
  std::string model;                                // tokenizer.ggml.model: "gpt2" or "llama"
  std::optional<std::string> pre;                   // tokenizer.ggml.pre
  std::vector<std::string> tokens;                  // tokenizer.ggml.tokens
  std::optional<std::vector<float>> scores;         // tokenizer.ggml.scores
  std::optional<std::vector<int64_t>> token_types;  // tokenizer.ggml.token_type
  std::optional<std::vector<std::string>> merges;   // tokenizer.ggml.merges
  // The integer keys present, by name without the prefix ("bos_token_id", "eos_token_id",
  // "fim_pre_token_id", ...), and the boolean ones ("add_bos_token", "add_space_prefix", ...).
  std::map<std::string, int64_t, std::less<>> ids;
  std::map<std::string, bool, std::less<>> flags;
};

}  // namespace folio
