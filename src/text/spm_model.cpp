#include "text/spm_model.h"

#include <algorithm>
#include <cstdio>

#include "text/unicode_utf8.h"

namespace folio {

SpmModel::SpmModel(const Vocab& vocab, int32_t unknown_id) {
  for (uint32_t b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    int32_t id = vocab.find(hex);
    if (id < 0) {
      const char bare = static_cast<char>(b);
      id = vocab.find(std::string_view(&bare, 1));
    }
    // llama.cpp aborts here; mapping to <unk> keeps a malformed vocabulary usable.
    byte_tokens_[b] = id >= 0 ? id : unknown_id;
  }
}

void SpmModel::encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  struct Symbol {
    int32_t prev;
    int32_t next;
    uint32_t start;   // byte offset in text
    uint32_t length;  // in bytes; 0 once merged into its left neighbour
  };
  struct Bigram {
    float score;
    int32_t left;
    int32_t right;
    uint32_t length;  // length of left + right when queued; any change makes the entry stale
  };
  // Max-heap: highest score on top, then the leftmost position.
  const auto below = [](const Bigram& a, const Bigram& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };

  // Symbols are cut by the lead byte's announced length only (no validation), like llama.cpp.
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t offset = 0; offset < text.size();) {
    const size_t length = std::min(utf8_length_from_lead(static_cast<uint8_t>(text[offset])), text.size() - offset);
    const int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({index - 1, offset + length < text.size() ? index + 1 : -1, static_cast<uint32_t>(offset),
                       static_cast<uint32_t>(length)});
    offset += length;
  }

  std::vector<Bigram> heap;
  heap.reserve(symbols.size());
  const auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const uint32_t length = symbols[left].length + symbols[right].length;
    const int32_t id = vocab.find(text.substr(symbols[left].start, length));
    if (id < 0) return;
    heap.push_back({vocab.scores[id], left, right, length});
    std::push_heap(heap.begin(), heap.end(), below);
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), below);
    const Bigram top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[top.left];
    Symbol& right = symbols[top.right];
    if (left.length == 0 || right.length == 0 || left.length + right.length != top.length) continue;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    try_add(left.prev, top.left);
    try_add(top.left, left.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].start, symbols[i].length);
    if (const int32_t id = vocab.find(piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    for (const char c : piece) {
      const int32_t id = byte_tokens_[static_cast<uint8_t>(c)];
      if (id >= 0) out.push_back(id);
    }
  }
}

}  // namespace folio
