// A tokenizer.json's added tokens ("<|im_start|>", "<s>", user additions) and how Hugging
// Face tokenizers cuts them out of the input before anything else runs: leftmost-longest
// matches of their texts, left to right without overlaps, a single_word token only where no
// word character touches it, lstrip / rstrip swallowing the whitespace beside it. Tokens marked
// normalized are looked for in the normalized text (their own text normalized the same way);
// the others in the raw input.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/tokenizer.h"

namespace folio::hf {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

// One piece of a text after the added tokens are cut out: a token, or text to tokenize.
struct AddedSplit {
  int32_t token = -1;  // -1: text
  size_t begin = 0;    // byte range in the searched text (lstrip / rstrip included)
  size_t end = 0;
};

// The texts of a set of added tokens, matched leftmost-longest (a byte trie).
class AddedTokenMatcher {
 public:
  // patterns[i] is the text of tokens[i] to look for (its content, or its normalized form).
  void build(std::span<const AddedToken> tokens, std::span<const std::string> patterns);
  bool empty() const { return tokens_.empty(); }

  // Cuts `text` as tokenizers' AddedVocabulary::find_matches does. skip_special: special
  // tokens are not tokens here (encode with split_special_tokens); literal: special tokens
  // whose match overlaps one of these (sorted, disjoint) spans are not tokens either. Offsets
  // in literal are relative to `text`.
  std::vector<AddedSplit> split(std::string_view text, bool skip_special, std::span<const TextSpan> literal) const;

 private:
  // Longest pattern starting at `at`: its index into tokens_, and its length; -1 if none.
  std::pair<int32_t, size_t> longest_at(std::string_view text, size_t at) const;

  struct Node {
    int32_t token = -1;  // index into tokens_ of the pattern ending here
  };
  std::vector<Node> nodes_;                         // nodes_[0] is the root
  std::unordered_map<uint64_t, int32_t> children_;  // (node << 8 | byte) -> node
  std::vector<AddedToken> tokens_;
  bool first_byte_[256] = {};
};

}  // namespace folio::hf
