// Everything a Hugging Face model directory says besides its weights: config.json (the model's
// hyper-parameters, hf_config.h), the tokenizer files (tokenizer.json, tokenizer_config.json),
// the chat template (chat_template.jinja, else tokenizer_config.json's chat_template, a string
// or a list of named templates of which "default" is taken, as transformers does), and
// generation_config.json (the ids generation ends on, and default sampling values).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/hf_config.h"
#include "text/hf_tokenizer_files.h"

namespace folio {

// generation_config.json's values, each only when the file gives it.
struct HfGenerationConfig {
  std::vector<int32_t> eos_token_ids;  // eos_token_id: one id or a list
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int32_t> top_k;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
  std::optional<int32_t> max_new_tokens;
};

struct HfDirectory {
  std::string dir;
  HfModelConfig model;
  HfTokenizerFiles tokenizer;
  std::optional<std::string> chat_template;
  HfGenerationConfig generation;
};

Expected<HfDirectory> read_hf_directory(const std::string& dir);
// Only the tokenizer's files (no config.json needed): what `folio tokenize` reads.
Expected<HfTokenizerFiles> read_hf_tokenizer_files(const std::string& dir);
// generation_config.json's text (tests).
Expected<HfGenerationConfig> parse_hf_generation_config(const std::string& json_text,
                                                        const std::string& name = "generation_config.json");

}  // namespace folio
