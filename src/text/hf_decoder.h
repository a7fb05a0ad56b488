// A tokenizer.json's decoder: how Hugging Face tokenizers turns the texts of a list of tokens
// back into a string. Implemented: ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace,
// and Sequences of them; no decoder joins the texts with spaces, as tokenizers does. Any other
// type is a load error naming it.
//
// Two modes. kText is tokenizers' decode exactly (bytes that do not form UTF-8 become U+FFFD
// as it makes them; a leading space Metaspace or Strip removes is removed). kPiece is the
// bytes one token stands for in the middle of a text, raw: what a streaming detokenizer
// concatenates, holding back a character split across tokens.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "text/text_regex.h"

namespace folio::hf {

class Decoder {
 public:
  // `spec` is the "decoder" value (null: none).
  static Expected<Decoder> parse(const nlohmann::json& spec);

  enum class Mode { kText, kPiece };
  // tokens: the token texts (added tokens' contents, the model's vocabulary texts).
  std::string decode(std::vector<std::string> tokens, Mode mode) const;
  // decode({token}, kPiece) without building a list, for the common one-step chains.
  std::string piece(const std::string& token) const;

  bool empty() const { return steps_.empty(); }

 private:
  struct Step {
    enum class Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace } kind;
    std::optional<TextRegex> pattern;  // Replace
    std::string text;                  // Replace: content; Strip: the character; Metaspace: replacement
    size_t start = 0, stop = 0;        // Strip
    bool prepends = true;              // Metaspace: prepend_scheme is not "never"
  };
  static Status add(const nlohmann::json& spec, std::vector<Step>& steps);
  std::vector<Step> steps_;
};

}  // namespace folio::hf
