// A tokenizer.json's normalizer: what Hugging Face tokenizers does to each piece of text
// before pre-tokenizing it. Implemented: NFC, NFD, NFKC, NFKD (utf8proc), Prepend, Replace (a
// string or a regex), Strip, and Sequences of them. Any other type is a load error naming it.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "text/text_regex.h"

namespace folio::hf {

class Normalizer {
 public:
  // `spec` is the "normalizer" value (null: no normalizer).
  static Expected<Normalizer> parse(const nlohmann::json& spec);

  bool empty() const { return steps_.empty(); }
  // The normalized form of a piece of valid UTF-8 text.
  Expected<std::string> normalize(std::string_view text) const;

 private:
  struct Step {
    enum class Kind { kNfc, kNfd, kNfkc, kNfkd, kPrepend, kReplace, kStrip } kind;
    std::string text;                  // Prepend: the prefix; Replace: the replacement
    std::optional<TextRegex> regex;    // Replace
    bool left = false, right = false;  // Strip
  };
  static Status add(const nlohmann::json& spec, std::vector<Step>& steps);
  std::vector<Step> steps_;
};

// Unicode normalization forms of valid UTF-8 text.
enum class UnicodeForm { kNfc, kNfd, kNfkc, kNfkd };
Expected<std::string> unicode_normalize(std::string_view text, UnicodeForm form);

// Replaces every match of `regex` in `text` with `replacement`.
Expected<std::string> replace_all(const TextRegex& regex, std::string_view text, std::string_view replacement);

}  // namespace folio::hf
