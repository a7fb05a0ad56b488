#include "text/bpe_model.h"

#include <algorithm>

#include "text/byte_level.h"

namespace folio {

BpeModel BpeModel::build(const Vocab& vocab, const std::vector<std::string>& merges, bool ignore_merges) {
  BpeModel model;
  model.ignore_merges_ = ignore_merges;
  std::unordered_map<std::string, int32_t, TransparentStringHash, std::equal_to<>> synthetic_ids;
  const auto id_of = [&](std::string_view text) -> int32_t {
    if (const int32_t id = vocab.find(text); id >= 0) return id;
    if (const auto it = synthetic_ids.find(text); it != synthetic_ids.end()) return it->second;
    const int32_t id = vocab.size() + static_cast<int32_t>(model.synthetic_texts_.size());
    model.synthetic_texts_.emplace_back(text);
    synthetic_ids.emplace(std::string(text), id);
    return id;
  };

  for (uint32_t b = 0; b < 256; ++b) {
    std::string text;
    append_byte_level(text, std::string_view(reinterpret_cast<const char*>(&b), 1));
    model.byte_symbol_[b] = id_of(text);
  }

  model.merges_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& line = merges[rank];
    // Split at the first space after the first character: a left side may itself be a space
    // in vocabularies that do not byte-encode.
    const size_t space = line.size() > 1 ? line.find(' ', 1) : std::string::npos;
    if (space == std::string::npos || space + 1 >= line.size()) continue;
    const std::string_view left(line.data(), space);
    const std::string_view right(line.data() + space + 1, line.size() - space - 1);
    joined.assign(left).append(right);
    const int32_t left_id = id_of(left);
    const int32_t right_id = id_of(right);
    // The first occurrence of a pair keeps its rank, as with llama.cpp's map emplace.
    model.merges_.try_emplace(pair_key(left_id, right_id), Merge{static_cast<int32_t>(rank), id_of(joined)});
  }
  return model;
}

void BpeModel::emit(const Vocab& vocab, int32_t id, std::vector<int32_t>& out) const {
  if (id < vocab.size()) {
    out.push_back(id);
    return;
  }
  // Not a token: llama.cpp then looks up each byte of the text as a one-byte token, which can
  // only succeed for the ASCII characters that spell themselves.
  for (const char c : synthetic_texts_[id - vocab.size()]) {
    const int32_t single = vocab.find(std::string_view(&c, 1));
    if (single >= 0) out.push_back(single);
  }
}

void BpeModel::encode_word(const Vocab& vocab, std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    std::string spelled;
    append_byte_level(spelled, word);
    if (const int32_t id = vocab.find(spelled); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (word.size() == 1) {
    emit(vocab, byte_symbol_[static_cast<uint8_t>(word[0])], out);
    return;
  }

  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    uint32_t length;  // in bytes; 0 once merged into its left neighbour
  };
  struct Bigram {
    int32_t rank;
    int32_t left;
    int32_t right;
    int32_t result;
    uint32_t length;  // length of left + right when queued; any change makes the entry stale
  };
  // std heap functions build a max-heap; "greater" puts the lowest rank, then the leftmost
  // position, on top.
  const auto later = [](const Bigram& a, const Bigram& b) {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  };

  const int32_t n = static_cast<int32_t>(word.size());
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i) {
    symbols[i] = {byte_symbol_[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, 1};
  }
  std::vector<Bigram> heap;
  heap.reserve(n);
  const auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const auto it = merges_.find(pair_key(symbols[left].id, symbols[right].id));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, left, right, it->second.result, symbols[left].length + symbols[right].length});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int32_t i = 1; i < n; ++i) try_add(i - 1, i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Bigram top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[top.left];
    Symbol& right = symbols[top.right];
    if (left.length == 0 || right.length == 0 || left.length + right.length != top.length) continue;
    left.id = top.result;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    try_add(left.prev, top.left);
    try_add(top.left, left.next);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) emit(vocab, symbols[i].id, out);
}

}  // namespace folio
