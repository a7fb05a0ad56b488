// SentencePiece-style BPE (tokenizer.ggml.model = "llama": Llama 2, Mistral, TinyLlama), as
// llama.cpp runs it: the text (spaces already escaped as U+2581) starts as one symbol per UTF-8
// character; the adjacent pair whose concatenation is the token with the highest score merges
// first (leftmost on ties); a final symbol that is not a token falls back to <0xXX> byte tokens.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "text/vocab.h"

namespace folio {

class SpmModel {
 public:
  explicit SpmModel(const Vocab& vocab, int32_t unknown_id);

  // Appends the ids for text, whose spaces must already be escaped.
  void encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) const;

  // The <0xXX> token of each byte (-1 if the vocabulary has neither it nor the bare byte).
  int32_t byte_token(uint8_t byte) const { return byte_tokens_[byte]; }

 private:
  std::array<int32_t, 256> byte_tokens_{};
};

}  // namespace folio
