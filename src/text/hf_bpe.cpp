#include "text/hf_bpe.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "text/unicode_utf8.h"

namespace folio::hf {
namespace {

using nlohmann::json;

constexpr char32_t kSmallChars = 0x800;

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  uint32_t len;  // bytes; 0 once merged into its left neighbour
};

struct Candidate {
  uint32_t rank;
  uint32_t pos;
  int32_t result;
  // std::*_heap keep the largest first: "larger" here is the lower rank, then the lower pos.
  bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

std::string byte_token_text(uint8_t b) {
  char text[8];
  std::snprintf(text, sizeof(text), "<0x%02X>", b);
  return text;
}

}  // namespace

Expected<Bpe> Bpe::parse(const json& model) {
  Bpe bpe;
  if (!model.is_object()) return Status::error("tokenizer.json: 'model' is not an object");
  const std::string type = model.value("type", std::string("BPE"));
  if (type != "BPE") {
    return Status::error("tokenizer.json: model type '" + type + "' is not supported (folio implements BPE)");
  }
  for (const char* unsupported : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(unsupported) && !model[unsupported].is_null() && model[unsupported] != "") {
      return Status::error(std::string("tokenizer.json: BPE ") + unsupported + " is not supported");
    }
  }
  if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"] != 0.0) {
    return Status::error("tokenizer.json: BPE dropout is a training option; folio encodes without it");
  }
  const auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object()) return Status::error("tokenizer.json: the BPE model has no vocab");
  bpe.vocab_.reserve(vocab->size());
  for (const auto& [text, id] : vocab->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= (int64_t{1} << 31)) {
      return Status::error("tokenizer.json: vocab entry '" + text + "' has id " + id.dump() + ", not an id");
    }
    bpe.vocab_[text] = static_cast<int32_t>(id.get<int64_t>());
  }
  const auto find = [&](std::string_view text) {
    const auto it = bpe.vocab_.find(text);
    return it == bpe.vocab_.end() ? -1 : it->second;
  };

  const auto merges = model.find("merges");
  if (merges != model.end() && !merges->is_null()) {
    if (!merges->is_array()) return Status::error("tokenizer.json: BPE merges is not an array");
    bpe.merges_.reserve(merges->size());
    uint32_t rank = 0;
    for (const json& m : *merges) {
      std::string left, right;
      if (m.is_string()) {
        const std::string line = m.get<std::string>();
        const size_t space = line.find(' ');
        if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
          return Status::error("tokenizer.json: merge " + std::to_string(rank + 1) + " '" + line +
                               "' is not two texts separated by one space");
        }
        left = line.substr(0, space);
        right = line.substr(space + 1);
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        left = m[0].get<std::string>();
        right = m[1].get<std::string>();
      } else {
        return Status::error("tokenizer.json: merge " + std::to_string(rank + 1) + " " + m.dump() +
                             " is neither \"a b\" nor [\"a\", \"b\"]");
      }
      const int32_t l = find(left), r = find(right), result = find(left + right);
      for (const auto& [id, text] : {std::pair{l, left}, std::pair{r, right}, std::pair{result, left + right}}) {
        if (id < 0) {
          return Status::error("tokenizer.json: merge " + std::to_string(rank + 1) + " ('" + left + "', '" + right +
                               "') names '" + text + "', which is not in the vocabulary");
        }
      }
      bpe.merges_[pair_key(l, r)] = Merge{rank, result};  // a repeated pair: the later rank, as tokenizers
      ++rank;
    }
  }

  if (const auto unk = model.find("unk_token"); unk != model.end() && !unk->is_null()) {
    if (!unk->is_string()) return Status::error("tokenizer.json: BPE unk_token is not a string");
    bpe.unk_id_ = find(unk->get<std::string>());
    // tokenizers fails only when an unknown character is met; folio says so at load.
    if (bpe.unk_id_ < 0)
      return Status::error("tokenizer.json: unk_token '" + unk->get<std::string>() + "' is not in the vocabulary");
  }
  bpe.byte_fallback_ = model.value("byte_fallback", false);
  bpe.fuse_unk_ = model.value("fuse_unk", false);
  bpe.ignore_merges_ = model.value("ignore_merges", false);
  for (int b = 0; b < 256; ++b) bpe.byte_ids_[b] = find(byte_token_text(static_cast<uint8_t>(b)));
  bpe.small_char_ids_.assign(kSmallChars, -1);
  std::string ch;
  for (char32_t cp = 0; cp < kSmallChars; ++cp) {
    ch.clear();
    append_utf8(ch, cp);
    bpe.small_char_ids_[cp] = find(ch);
  }
  return bpe;
}

int32_t Bpe::char_id(std::string_view ch, char32_t cp) const {
  if (cp < kSmallChars) return small_char_ids_[cp];
  const auto it = vocab_.find(ch);
  return it == vocab_.end() ? -1 : it->second;
}

void Bpe::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (const auto it = vocab_.find(word); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap;
  symbols.clear();
  heap.clear();
  const auto add = [&](int32_t id, uint32_t len) {
    const int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, -1, len});
    if (index > 0) symbols[index - 1].next = index;
  };
  int32_t unk = -1;
  uint32_t unk_len = 0;
  for (size_t at = 0; at < word.size();) {
    const size_t n = std::min(utf8_length_from_lead(static_cast<uint8_t>(word[at])), word.size() - at);
    const std::string_view ch = word.substr(at, n);
    char32_t cp = static_cast<uint8_t>(ch[0]);
    if (n > 1) cp = decode_utf8_lenient(ch)[0];
    at += n;
    if (const int32_t id = char_id(ch, cp); id >= 0) {
      if (unk >= 0) {
        add(unk, unk_len);
        unk = -1;
      }
      add(id, static_cast<uint32_t>(n));
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (const char b : ch) all = all && byte_ids_[static_cast<uint8_t>(b)] >= 0;
      if (all) {
        // As tokenizers: a pending unknown is not flushed before byte tokens.
        for (const char b : ch) add(byte_ids_[static_cast<uint8_t>(b)], 1);
        continue;
      }
    }
    if (unk_id_ >= 0) {
      if (unk >= 0 && fuse_unk_) {
        unk_len += static_cast<uint32_t>(n);
      } else {
        if (unk >= 0) add(unk, unk_len);
        unk = unk_id_;
        unk_len = static_cast<uint32_t>(n);
      }
    }
    // No unknown token: tokenizers drops the character, and so does folio.
  }
  if (unk >= 0) add(unk, unk_len);

  if (symbols.size() > 1 && !merges_.empty()) {
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto it = merges_.find(pair_key(symbols[i].id, symbols[i + 1].id));
      if (it != merges_.end()) heap.push_back({it->second.rank, static_cast<uint32_t>(i), it->second.result});
    }
    std::make_heap(heap.begin(), heap.end());
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end());
      const Candidate top = heap.back();
      heap.pop_back();
      Symbol& left = symbols[top.pos];
      if (left.len == 0 || left.next < 0) continue;
      const Symbol right = symbols[left.next];
      // A stale entry: the pair at this position is no longer the one it was made for.
      const auto now = merges_.find(pair_key(left.id, right.id));
      if (now == merges_.end() || now->second.result != top.result) continue;
      const int32_t right_index = left.next;
      left.id = top.result;
      left.len += right.len;
      left.next = right.next;
      symbols[right_index].len = 0;
      if (right.next >= 0) symbols[right.next].prev = static_cast<int32_t>(top.pos);
      if (left.prev >= 0) {
        const auto m = merges_.find(pair_key(symbols[left.prev].id, left.id));
        if (m != merges_.end()) {
          heap.push_back({m->second.rank, static_cast<uint32_t>(left.prev), m->second.result});
          std::push_heap(heap.begin(), heap.end());
        }
      }
      if (left.next >= 0) {
        const auto m = merges_.find(pair_key(left.id, symbols[left.next].id));
        if (m != merges_.end()) {
          heap.push_back({m->second.rank, top.pos, m->second.result});
          std::push_heap(heap.begin(), heap.end());
        }
      }
    }
  }
  for (const Symbol& s : symbols) {
    if (s.len != 0) out.push_back(s.id);
  }
}

}  // namespace folio::hf
