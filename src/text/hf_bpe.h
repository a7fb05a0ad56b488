// The BPE model of a tokenizer.json ("model": {"type": "BPE", ...}) as Hugging Face tokenizers
// runs it on one word: each character becomes its token (or, with byte_fallback, its <0xAB>
// byte tokens, or the unknown token, fused with a neighbouring unknown when fuse_unk), then
// merges apply lowest rank first, leftmost first among equal ranks. ignore_merges: a word that
// is itself a token is that token. Merges are read in both forms tokenizer.json has used
// ("a b" strings and ["a", "b"] pairs); a merge naming a text that is not a token is a load
// error naming the merge, as it is for tokenizers.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "text/vocab.h"

namespace folio::hf {

class Bpe {
 public:
  // `model` is the "model" object.
  static Expected<Bpe> parse(const nlohmann::json& model);

  // Appends the ids of one word (valid UTF-8, in the vocabulary's alphabet).
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  // The model's vocabulary: text -> id, and id -> text for the ids it has.
  const std::unordered_map<std::string, int32_t, TransparentStringHash, std::equal_to<>>& vocab() const {
    return vocab_;
  }
  int32_t unknown_id() const { return unk_id_; }
  bool byte_fallback() const { return byte_fallback_; }
  int32_t byte_token(uint8_t byte) const { return byte_ids_[byte]; }
  size_t num_merges() const { return merges_.size(); }

 private:
  struct Merge {
    uint32_t rank;
    int32_t result;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  int32_t char_id(std::string_view ch, char32_t cp) const;

  std::unordered_map<std::string, int32_t, TransparentStringHash, std::equal_to<>> vocab_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::vector<int32_t> small_char_ids_;  // ids of U+0000..U+07FF as one-character tokens, or -1
  std::array<int32_t, 256> byte_ids_{};  // <0xAB> token ids, or -1
  int32_t unk_id_ = -1;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
};

}  // namespace folio::hf
