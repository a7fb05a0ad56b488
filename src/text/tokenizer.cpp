#include "text/tokenizer.h"

#include <algorithm>

#include "text/bpe_model.h"
#include "text/hf_tokenizer.h"
#include "text/pre_tokenizer.h"
#include "text/spm_model.h"
#include "text/tokenizer_state.h"
#include "text/unicode_utf8.h"

namespace folio {
namespace {

const std::string kEmpty;

constexpr std::string_view kSpaceEscape = "\xE2\x96\x81";  // U+2581, SentencePiece's space

void append_escaping_spaces(std::string& out, std::string_view text) {
  for (const char c : text) {
    if (c == ' ') {
      out.append(kSpaceEscape);
    } else {
      out.push_back(c);
    }
  }
}

// A piece of the input after the special-token partition: either a token or a byte range.
struct Fragment {
  int32_t token;  // -1: text
  size_t offset;
  size_t length;
};

// Whether [offset, offset + length) overlaps one of the (sorted, disjoint) literal spans.
bool overlaps(std::span<const TextSpan> spans, size_t offset, size_t length) {
  for (const TextSpan& span : spans) {
    if (span.offset >= offset + length) break;
    if (span.offset + span.length > offset) return true;
  }
  return false;
}

// Cuts the text at every occurrence of a special token's text, longest texts first, each token
// over all fragments before the next token (llama.cpp's order, which decides overlaps). A control
// or unknown token's text that overlaps a literal span stays text.
std::vector<Fragment> partition_special(const Tokenizer::State& s, std::string_view text, bool parse_special,
                                        std::span<const TextSpan> literal_spans) {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (const int32_t id : s.partition_tokens) {
    const uint8_t attrs = s.vocab.attrs[id];
    if (!parse_special && (attrs & (kAttrControl | kAttrUnknown))) continue;
    const std::string& needle = s.vocab.texts[id];
    next.clear();
    bool found = false;
    for (const Fragment& fragment : fragments) {
      if (fragment.token >= 0) {
        next.push_back(fragment);
        continue;
      }
      const size_t end = fragment.offset + fragment.length;
      const std::string_view window = text.substr(0, end);
      size_t pos = fragment.offset;
      const bool control = (attrs & (kAttrControl | kAttrUnknown)) != 0;
      for (size_t match, from = pos; (match = window.find(needle, from)) != std::string_view::npos;) {
        if (control && overlaps(literal_spans, match, needle.size())) {
          from = match + 1;  // the user's text: not a token here
          continue;
        }
        found = true;
        if (match > pos) next.push_back({-1, pos, match - pos});
        next.push_back({id, match, needle.size()});
        pos = from = match + needle.size();
      }
      if (pos < end) next.push_back({-1, pos, end - pos});
    }
    if (found) fragments.swap(next);
  }
  return fragments;
}

}  // namespace

Expected<Tokenizer> Tokenizer::from_metadata(const TokenizerMetadata& file) {
  Expected<std::shared_ptr<State>> state = load_tokenizer_state(file);
  if (!state) return state.status();
  return Tokenizer(std::move(state.value()));
}

Expected<Tokenizer> Tokenizer::from_hf(const HfTokenizerFiles& files) {
  Expected<std::shared_ptr<State>> state = hf::load_state(files);
  if (!state) return state.status();
  return Tokenizer(std::move(state.value()));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  return encode(text, add_special, parse_special, {});
}

bool Tokenizer::contains_control_text(std::string_view text) const {
  if (state_->kind == TokenizerKind::kHuggingFace) return hf::contains_special_text(*state_, text);
  for (const Fragment& fragment : partition_special(*state_, text, /*parse_special=*/true, {})) {
    if (fragment.token >= 0 && (state_->vocab.attrs[fragment.token] & (kAttrControl | kAttrUnknown))) return true;
  }
  return false;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special,
                                       std::span<const TextSpan> literal_spans) const {
  const State& s = *state_;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (s.kind == TokenizerKind::kHuggingFace) {
    hf::encode(s, text, add_special, parse_special, literal_spans, ids);
    return ids;
  }
  if (add_special && s.add_bos && s.bos_id >= 0) ids.push_back(s.bos_id);

  const std::vector<Fragment> fragments = partition_special(s, text, parse_special, literal_spans);
  if (s.kind == TokenizerKind::kSentencePieceBpe) {
    std::string escaped;
    bool after_special = true;  // the first piece counts as following a special token
    for (const Fragment& fragment : fragments) {
      if (fragment.token >= 0) {
        ids.push_back(fragment.token);
        after_special = true;
        continue;
      }
      escaped.clear();
      if (s.add_space_prefix && after_special) escaped.append(kSpaceEscape);
      append_escaping_spaces(escaped, text.substr(fragment.offset, fragment.length));
      s.spm->encode(s.vocab, escaped, ids);
      after_special = false;
    }
  } else {
    std::string word;
    for (const Fragment& fragment : fragments) {
      if (fragment.token >= 0) {
        ids.push_back(fragment.token);
        continue;
      }
      const std::vector<char32_t> cps = decode_utf8_lenient(text.substr(fragment.offset, fragment.length));
      size_t begin = 0;
      for (const uint32_t length : split_words(s.pre_tokenizer, cps)) {
        word.clear();
        for (size_t i = begin; i < begin + length; ++i) append_utf8(word, cps[i]);
        s.bpe->encode_word(s.vocab, word, ids);
        begin += length;
      }
    }
  }

  if (add_special && s.add_eos && s.eos_id >= 0) ids.push_back(s.eos_id);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  if (state_->kind == TokenizerKind::kHuggingFace) return hf::decode(*state_, ids, skip_special);
  std::string text;
  for (const int32_t id : ids) {
    if (skip_special && is_special(id)) continue;
    text += token_to_piece(id);
  }
  return text;
}

const std::string& Tokenizer::token_to_piece(int32_t id) const {
  return state_->vocab.contains(id) ? state_->pieces[id] : kEmpty;
}

const std::string& Tokenizer::token_text(int32_t id) const {
  return state_->vocab.contains(id) ? state_->vocab.texts[id] : kEmpty;
}

std::optional<int32_t> Tokenizer::token_id(std::string_view text) const {
  const int32_t id = state_->vocab.find(text);
  return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}

size_t Tokenizer::max_token_bytes() const {
  return state_->max_piece_bytes;
}

int32_t Tokenizer::vocab_size() const {
  return state_->vocab.size();
}
TokenizerKind Tokenizer::kind() const {
  return state_->kind;
}
int32_t Tokenizer::bos_id() const {
  return state_->bos_id;
}
int32_t Tokenizer::eos_id() const {
  return state_->eos_id;
}
int32_t Tokenizer::eot_id() const {
  return state_->eot_id;
}
int32_t Tokenizer::unknown_id() const {
  return state_->unknown_id;
}
int32_t Tokenizer::padding_id() const {
  return state_->padding_id;
}
bool Tokenizer::add_bos() const {
  return state_->add_bos;
}
bool Tokenizer::add_eos() const {
  return state_->add_eos;
}
bool Tokenizer::add_space_prefix() const {
  return state_->add_space_prefix;
}

bool Tokenizer::is_end_of_generation(int32_t id) const {
  const std::vector<int32_t>& eog = state_->end_of_generation_ids;
  return std::binary_search(eog.begin(), eog.end(), id);
}
const std::vector<int32_t>& Tokenizer::end_of_generation_ids() const {
  return state_->end_of_generation_ids;
}
bool Tokenizer::is_special(int32_t id) const {
  return state_->vocab.has_attr(id, kAttrControl | kAttrUnknown);
}
bool Tokenizer::is_control(int32_t id) const {
  return state_->vocab.has_attr(id, kAttrControl);
}
bool Tokenizer::is_user_defined(int32_t id) const {
  return state_->vocab.has_attr(id, kAttrUserDefined);
}
bool Tokenizer::is_byte(int32_t id) const {
  return state_->vocab.has_attr(id, kAttrByte);
}

}  // namespace folio
