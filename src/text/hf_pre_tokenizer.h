// A tokenizer.json's pre-tokenizer: how Hugging Face tokenizers cuts each normalized piece of
// text into the words BPE runs on. Implemented: ByteLevel (GPT-2's regex and byte alphabet),
// Split (a string or a regex, with its behavior and invert), Digits, Metaspace (with its
// prepend_scheme and split), WhitespaceSplit, and Sequences of them.
// Any other type is a load error naming it.
//
// Regexes run through PCRE2 (text_regex.h). For the patterns that byte-level vocabularies use
// (GPT-2's, Llama 3's, Qwen2's), the hand-written matchers of pre_tokenizer.h give the same
// words several times faster; tests check both ways agree on the goldens.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "text/pre_tokenizer.h"
#include "text/text_regex.h"

namespace folio::hf {

// Pieces of text, each a byte range of one buffer. at_start: the piece begins where the whole
// input begins (what Metaspace's prepend_scheme "first" asks).
struct PieceList {
  struct Piece {
    size_t begin = 0;
    size_t end = 0;
    bool at_start = false;
  };
  std::string text;
  std::vector<Piece> pieces;

  std::string_view view(const Piece& p) const { return std::string_view(text).substr(p.begin, p.end - p.begin); }
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// The replacement Metaspace puts for spaces (and in front of words), and when.
enum class PrependScheme { kAlways, kFirst, kNever };

class PreTokenizer {
 public:
  // `spec` is the "pre_tokenizer" value (null: none, every piece is one word).
  static Expected<PreTokenizer> parse(const nlohmann::json& spec);

  // Cuts every piece into words in place. use_fast_paths false: every regex goes through PCRE2
  // (tests compare the two).
  Status run(PieceList& pieces, RegexScratch& scratch, bool use_fast_paths = true) const;

  bool empty() const { return steps_.empty(); }
  // Whether the last step maps text to GPT-2's byte alphabet (the vocabulary is byte-level).
  bool byte_level() const;

 private:
  struct Step {
    enum class Kind { kByteLevel, kSplit, kDigits, kMetaspace, kWhitespaceSplit } kind;
    bool add_prefix_space = false;         // ByteLevel
    bool use_regex = true;                 // ByteLevel
    std::optional<TextRegex> regex;        // Split, ByteLevel with use_regex
    std::optional<PreTokenizerKind> fast;  // a hand-written matcher for the regex
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;             // Split: the matches are the gaps
    bool individual_digits = false;  // Digits
    std::string replacement;         // Metaspace
    PrependScheme prepend = PrependScheme::kAlways;
    bool split = true;  // Metaspace
  };
  static Status add(const nlohmann::json& spec, std::vector<Step>& steps);
  Status run_step(const Step& step, PieceList& pieces, RegexScratch& scratch, bool use_fast_paths) const;

  std::vector<Step> steps_;
};

// Parses "Isolated", "Removed", ... (the serialized SplitDelimiterBehavior).
std::optional<SplitBehavior> split_behavior_from_name(std::string_view name);
// The hand-written matcher that stands for a regex, if there is one.
std::optional<PreTokenizerKind> fast_matcher_for(std::string_view regex);

}  // namespace folio::hf
