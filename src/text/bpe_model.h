// Byte-level BPE (GPT-2 style, tokenizer.ggml.model = "gpt2") over one pre-tokenized word.
//
// Merges are kept as (left id, right id) -> (rank, result id), so a merge step is one hash
// lookup on two integers instead of string concatenation. The word starts as one symbol per
// byte; a min-heap on (rank, position) picks the next merge, exactly the order llama.cpp uses;
// stale heap entries are recognised by the lengths of the two symbols they joined.
//
// Texts that take part in merges but are not tokens (possible only in malformed vocabularies)
// get "synthetic" ids past the vocabulary, so the merge order still follows the merge list as
// llama.cpp's text-based lookup would; a final symbol with such an id is emitted byte by byte.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/vocab.h"

namespace folio {

class BpeModel {
 public:
  // merges: "left right" strings, highest priority first (tokenizer.ggml.merges).
  // ignore_merges: a word that is itself a token is emitted whole (Llama-3's tokenizer.json).
  static BpeModel build(const Vocab& vocab, const std::vector<std::string>& merges, bool ignore_merges);

  // Appends the ids of one word given as raw bytes (not yet in the byte-level alphabet).
  void encode_word(const Vocab& vocab, std::string_view word, std::vector<int32_t>& out) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;  // token id, or a synthetic id
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  void emit(const Vocab& vocab, int32_t id, std::vector<int32_t>& out) const;

  std::unordered_map<uint64_t, Merge> merges_;
  std::array<int32_t, 256> byte_symbol_{};    // id of the symbol each raw byte starts as
  std::vector<std::string> synthetic_texts_;  // id vocab.size() + i spells synthetic_texts_[i]
  bool ignore_merges_ = false;
};

}  // namespace folio
