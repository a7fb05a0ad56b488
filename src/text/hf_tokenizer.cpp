#include "text/hf_tokenizer.h"

#include "text/tokenizer_state.h"
#include "text/unicode_utf8.h"

namespace folio::hf {
namespace {

// Makes text valid UTF-8 as Python's decode(errors="replace") does, moving the literal spans
// with it.
std::string sanitized(std::string_view text, std::span<const TextSpan> spans, std::vector<TextSpan>& moved) {
  std::vector<size_t> to(text.size() + 1, 0);
  std::string out;
  out.reserve(text.size() + 8);
  for (size_t at = 0; at < text.size();) {
    const Utf8Step step = next_utf8_step(text.substr(at));
    const size_t n = step.kind == Utf8Step::Kind::kIncomplete ? text.size() - at : step.length;
    for (size_t i = 0; i < n; ++i) to[at + i] = out.size();
    if (step.kind == Utf8Step::Kind::kChar) {
      out.append(text.substr(at, n));
    } else {
      out.append("\xEF\xBF\xBD");
    }
    at += n;
  }
  to[text.size()] = out.size();
  moved.clear();
  for (const TextSpan& s : spans) {
    const size_t begin = to[s.offset], end = to[s.offset + s.length];
    moved.push_back({begin, end - begin});
  }
  return out;
}

bool overlaps(std::span<const TextSpan> spans, size_t begin, size_t end) {
  for (const TextSpan& s : spans) {
    if (s.offset >= end) break;
    if (s.offset + s.length > begin) return true;
  }
  return false;
}

}  // namespace

void encode(const Tokenizer::State& state, std::string_view input, bool add_special, bool parse_special,
            std::span<const TextSpan> literal_spans, std::vector<int32_t>& out) {
  const Pipeline& p = *state.hf;
  std::string valid;
  std::vector<TextSpan> moved;
  std::string_view text = input;
  if (!is_valid_utf8(input)) {
    valid = sanitized(input, literal_spans, moved);
    text = valid;
    literal_spans = moved;
  }
  if (add_special) out.insert(out.end(), p.prefix.begin(), p.prefix.end());
  thread_local RegexScratch scratch;
  PieceList words;
  for (const AddedSplit& raw : p.raw_matcher.split(text, !parse_special, literal_spans)) {
    if (raw.token >= 0) {
      out.push_back(raw.token);
      continue;
    }
    Expected<std::string> normalized = p.normalizer.normalize(text.substr(raw.begin, raw.end - raw.begin));
    if (!normalized) continue;  // only utf8proc's allocation can fail on valid UTF-8
    // A piece holding the user's literal text never yields special tokens.
    const bool literal = overlaps(literal_spans, raw.begin, raw.end);
    for (const AddedSplit& split : p.normalized_matcher.split(*normalized, !parse_special || literal, {})) {
      if (split.token >= 0) {
        out.push_back(split.token);
        continue;
      }
      words.text.assign(*normalized, split.begin, split.end - split.begin);
      words.pieces.assign(1, PieceList::Piece{0, words.text.size(), raw.begin == 0 && split.begin == 0});
      if (!p.pre_tokenizer.run(words, scratch)) continue;  // PCRE2's limits: the piece is dropped
      for (const PieceList::Piece& w : words.pieces) p.model.encode_word(words.view(w), out);
    }
  }
  if (add_special) out.insert(out.end(), p.suffix.begin(), p.suffix.end());
}

std::string decode(const Tokenizer::State& state, std::span<const int32_t> ids, bool skip_special) {
  const Pipeline& p = *state.hf;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    if (!state.vocab.contains(id) || (state.vocab.attrs[id] & kAttrUnused)) continue;
    if (skip_special && p.special[id]) continue;
    tokens.push_back(state.vocab.texts[id]);
  }
  return p.decoder.decode(std::move(tokens), Decoder::Mode::kText);
}

bool contains_special_text(const Tokenizer::State& state, std::string_view text) {
  const Pipeline& p = *state.hf;
  std::string valid;
  std::vector<TextSpan> moved;
  if (!is_valid_utf8(text)) {
    valid = sanitized(text, {}, moved);
    text = valid;
  }
  for (const AddedTokenMatcher* m : {&p.raw_matcher, &p.normalized_matcher}) {
    for (const AddedSplit& s : m->split(text, /*skip_special=*/false, {})) {
      if (s.token >= 0 && p.special[s.token]) return true;
    }
  }
  return false;
}

}  // namespace folio::hf
