#include "text/hf_added_tokens.h"

#include <algorithm>

#include "text/unicode_categories.h"
#include "text/unicode_utf8.h"

namespace folio::hf {
namespace {

// One UTF-8 character's code point at `at` (the text is valid UTF-8) and its length.
std::pair<char32_t, size_t> char_at(std::string_view s, size_t at) {
  const size_t n = std::min(utf8_length_from_lead(static_cast<uint8_t>(s[at])), s.size() - at);
  const std::vector<char32_t> cps = decode_utf8_lenient(s.substr(at, n));
  return {cps.empty() ? kReplacementChar : cps[0], n};
}

// The start of the character that ends at `end`.
size_t char_start_before(std::string_view s, size_t end) {
  size_t at = end - 1;
  while (at > 0 && (static_cast<uint8_t>(s[at]) & 0xC0) == 0x80) --at;
  return at;
}

// Rust regex's \w: alphabetic, marks, decimal digits, connector punctuation, join controls.
bool is_word_char(char32_t cp) {
  if (cp == '_' || cp == 0x200C || cp == 0x200D) return true;
  const CodepointClass c = codepoint_class(cp);
  return c == CodepointClass::kLetter || c == CodepointClass::kNumber || c == CodepointClass::kMark;
}

bool is_space(char32_t cp) {
  return is_unicode_whitespace(cp);
}

}  // namespace

void AddedTokenMatcher::build(std::span<const AddedToken> tokens, std::span<const std::string> patterns) {
  nodes_.assign(1, Node{});
  children_.clear();
  tokens_.assign(tokens.begin(), tokens.end());
  std::fill(std::begin(first_byte_), std::end(first_byte_), false);
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& p = patterns[t];
    if (p.empty()) continue;  // tokenizers never matches an empty text
    first_byte_[static_cast<uint8_t>(p[0])] = true;
    int32_t node = 0;
    for (const char c : p) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(c);
      auto it = children_.find(key);
      if (it == children_.end()) {
        it = children_.emplace(key, static_cast<int32_t>(nodes_.size())).first;
        nodes_.push_back(Node{});
      }
      node = it->second;
    }
    // Two tokens with one text: the first one listed wins, as in the trie tokenizers builds.
    if (nodes_[node].token < 0) nodes_[node].token = static_cast<int32_t>(t);
  }
}

std::pair<int32_t, size_t> AddedTokenMatcher::longest_at(std::string_view text, size_t at) const {
  int32_t found = -1;
  size_t length = 0;
  int32_t node = 0;
  for (size_t i = at; i < text.size(); ++i) {
    const auto it = children_.find((static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(text[i]));
    if (it == children_.end()) break;
    node = it->second;
    if (nodes_[node].token >= 0) {
      found = nodes_[node].token;
      length = i + 1 - at;
    }
  }
  return {found, length};
}

std::vector<AddedSplit> AddedTokenMatcher::split(std::string_view text, bool skip_special,
                                                 std::span<const TextSpan> literal) const {
  std::vector<AddedSplit> splits;
  if (text.empty()) return splits;
  size_t start_offset = 0;
  size_t at = 0;
  while (!tokens_.empty() && at < text.size()) {
    if (!first_byte_[static_cast<uint8_t>(text[at])]) {
      ++at;
      continue;
    }
    const auto [index, length] = longest_at(text, at);
    if (index < 0) {
      ++at;
      continue;
    }
    size_t start = at, stop = at + length;
    at = stop;  // matching resumes after this match whether or not it is used
    const AddedToken& token = tokens_[index];
    if (token.special && skip_special) continue;
    if (token.special && !literal.empty()) {
      bool overlapped = false;
      for (const TextSpan& span : literal) {
        if (span.offset >= stop) break;
        if (span.offset + span.length > start) overlapped = true;
      }
      if (overlapped) continue;
    }
    if (token.single_word) {
      const bool start_space = start == 0 || !is_word_char(char_at(text, char_start_before(text, start)).first);
      const bool stop_space = stop == text.size() || !is_word_char(char_at(text, stop).first);
      if (!start_space || !stop_space) continue;
    }
    if (token.lstrip) {
      size_t new_start = start;
      while (new_start > 0) {
        const size_t prev = char_start_before(text, new_start);
        if (!is_space(char_at(text, prev).first)) break;
        new_start = prev;
      }
      start = std::max(new_start, start_offset);
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        const auto [cp, n] = char_at(text, stop);
        if (!is_space(cp)) break;
        stop += n;
      }
    }
    if (start_offset < start) splits.push_back({-1, start_offset, start});
    splits.push_back({token.id, start, stop});
    start_offset = stop;
  }
  if (start_offset != text.size()) splits.push_back({-1, start_offset, text.size()});
  return splits;
}

}  // namespace folio::hf
