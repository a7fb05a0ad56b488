#include "text/pre_tokenizer.h"

#include <algorithm>
#include <array>
#include <string>

#include "text/unicode_categories.h"

namespace folio {
namespace {

// Per-position facts the matchers ask about. kInRange is set for every real position, so a
// zero value means "past the end of the piece", as in llama.cpp's matchers.
enum : uint8_t { kLetter = 1, kNumber = 2, kSpace = 4, kInRange = 8 };

uint8_t facts_of(char32_t cp) {
  uint8_t facts = kInRange;
  const CodepointClass cls = codepoint_class(cp);
  if (cls == CodepointClass::kLetter) facts |= kLetter;
  if (cls == CodepointClass::kNumber) facts |= kNumber;
  if (is_unicode_whitespace(cp)) facts |= kSpace;
  return facts;
}

char32_t ascii_lower(char32_t cp) {
  return (cp >= 'A' && cp <= 'Z') ? cp + ('a' - 'A') : cp;
}

bool is_cr_or_lf(char32_t cp) {
  return cp == '\r' || cp == '\n';
}

// One piece of text [begin, end) being cut into words; appends word lengths to `out`.
class PieceSplitter {
 public:
  PieceSplitter(std::span<const char32_t> cps, std::span<const uint8_t> facts, size_t begin, size_t end,
                std::vector<uint32_t>& out)
      : cps_(cps), facts_(facts), end_(end), word_start_(begin), out_(out) {}

  void split_gpt2();
  void split_llama3(bool digits_in_threes);

 private:
  uint8_t at(size_t pos) const { return pos < end_ ? facts_[pos] : 0; }
  // Ends the current word at `pos` (which is where the matcher has arrived).
  void emit(size_t pos) {
    if (pos > word_start_) out_.push_back(static_cast<uint32_t>(pos - word_start_));
    word_start_ = pos;
  }
  // 's 't 're 've 'm 'll 'd at pos; returns the match length or 0.
  size_t contraction_at(size_t pos, bool ignore_case) const;

  std::span<const char32_t> cps_;
  std::span<const uint8_t> facts_;
  size_t end_;
  size_t word_start_;
  std::vector<uint32_t>& out_;
};

size_t PieceSplitter::contraction_at(size_t pos, bool ignore_case) const {
  if (cps_[pos] != '\'' || pos + 1 >= end_) return 0;
  const auto fold = [&](char32_t cp) { return ignore_case ? ascii_lower(cp) : cp; };
  const char32_t next = fold(cps_[pos + 1]);
  if (next == 's' || next == 't' || next == 'm' || next == 'd') return 2;
  if (pos + 2 >= end_) return 0;
  const char32_t next2 = fold(cps_[pos + 2]);
  if ((next == 'r' && next2 == 'e') || (next == 'v' && next2 == 'e') || (next == 'l' && next2 == 'l')) {
    return 3;
  }
  return 0;
}

void PieceSplitter::split_gpt2() {
  size_t pos = word_start_;
  while (pos < end_) {
    const char32_t cp = cps_[pos];
    if (const size_t n = contraction_at(pos, /*ignore_case=*/false)) {
      emit(pos += n);
      continue;
    }
    // An optional leading space joins a run of letters, of digits, or of other symbols.
    const uint8_t lead = cp == ' ' ? at(pos + 1) : at(pos);
    const uint8_t run_kind = (lead & kLetter) ? kLetter : (lead & kNumber) ? kNumber : 0;
    if (run_kind != 0) {
      pos += (cp == ' ');
      while (at(pos) & run_kind) ++pos;
      emit(pos);
      continue;
    }
    const auto is_other = [](uint8_t f) { return !(f & (kSpace | kLetter | kNumber)) && f != 0; };
    if (is_other(lead)) {
      pos += (cp == ' ');
      while (is_other(at(pos))) ++pos;
      emit(pos);
      continue;
    }
    size_t spaces = 0;
    while (at(pos + spaces) & kSpace) ++spaces;
    if (spaces > 1 && pos + spaces < end_) {
      emit(pos += spaces - 1);  // \s+(?!\S): leave the last space to the word after it
    } else if (spaces > 0) {
      emit(pos += spaces);
    } else {
      emit(++pos);  // nothing matched: the character stands alone
    }
  }
}

void PieceSplitter::split_llama3(bool digits_in_threes) {
  size_t pos = word_start_;
  while (pos < end_) {
    const char32_t cp = cps_[pos];
    const uint8_t facts = at(pos);
    if (const size_t n = contraction_at(pos, /*ignore_case=*/true)) {
      emit(pos += n);
      continue;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!is_cr_or_lf(cp) && !(facts & kNumber) && ((facts & kLetter) || (at(pos + 1) & kLetter))) {
      ++pos;
      while (at(pos) & kLetter) ++pos;
      emit(pos);
      continue;
    }
    // \p{N}{1,3} (Llama-3) or \p{N} (Qwen2)
    if (facts & kNumber) {
      if (!digits_in_threes) {
        emit(++pos);
        continue;
      }
      size_t group_start = pos;
      while (at(pos) & kNumber) {
        if (++pos - group_start >= 3) {
          emit(pos);
          group_start = pos;
        }
      }
      emit(pos);
      continue;
    }
    // ?[^\s\p{L}\p{N}]+[\r\n]*
    const uint8_t lead = cp == ' ' ? at(pos + 1) : facts;
    const auto is_other = [](uint8_t f) { return !(f & (kSpace | kLetter | kNumber)); };
    if (is_other(lead)) {
      pos += (cp == ' ');
      while (is_other(at(pos)) && at(pos) != 0) ++pos;
      while (pos < end_ && is_cr_or_lf(cps_[pos])) ++pos;
      emit(pos);
      continue;
    }
    // \s*[\r\n]+ | \s+(?!\S) | \s+
    size_t spaces = 0;
    size_t after_last_newline = 0;  // 0: no \r or \n in the run
    while (at(pos + spaces) & kSpace) {
      if (is_cr_or_lf(cps_[pos + spaces])) after_last_newline = pos + spaces + 1;
      ++spaces;
    }
    if (after_last_newline != 0) {
      emit(pos = after_last_newline);
    } else if (spaces > 1 && pos + spaces < end_) {
      emit(pos += spaces - 1);
    } else if (spaces > 0) {
      emit(pos += spaces);
    } else {
      emit(++pos);
    }
  }
}

// Cuts each piece so that every maximal run of positions satisfying `in_class` becomes a piece
// of its own (llama.cpp's regex splitting keeps both the matches and the text between them).
// With `max_run` > 0 runs are cut into chunks of exactly max_run, leftover kept as gap text.
template <typename Pred>
std::vector<uint32_t> isolate_runs(const std::vector<uint32_t>& pieces, Pred in_class, size_t max_run = 0) {
  std::vector<uint32_t> out;
  out.reserve(pieces.size());
  size_t begin = 0;
  for (const uint32_t length : pieces) {
    const size_t end = begin + length;
    size_t gap_start = begin;
    size_t pos = begin;
    while (pos < end) {
      if (!in_class(pos)) {
        ++pos;
        continue;
      }
      size_t run_end = pos;
      while (run_end < end && in_class(run_end)) ++run_end;
      if (max_run == 0) {
        if (pos > gap_start) out.push_back(static_cast<uint32_t>(pos - gap_start));
        out.push_back(static_cast<uint32_t>(run_end - pos));
        gap_start = pos = run_end;
        continue;
      }
      while (run_end - pos >= max_run) {
        if (pos > gap_start) out.push_back(static_cast<uint32_t>(pos - gap_start));
        out.push_back(static_cast<uint32_t>(max_run));
        gap_start = pos = pos + max_run;
      }
      pos = run_end;
    }
    if (end > gap_start) out.push_back(static_cast<uint32_t>(end - gap_start));
    begin = end;
  }
  return out;
}

// ASCII characters that llama.cpp's "[\p{P}\$\+<=>\^~\|]" accepts: all ASCII punctuation and
// symbols except the backquote.
bool is_default_punct(char32_t cp, uint8_t facts) {
  if (cp < 128) {
    return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x5F) ||
           (cp >= 0x7B && cp <= 0x7E);
  }
  return !(facts & kSpace) && codepoint_class(cp) == CodepointClass::kPunctuation;
}

}  // namespace

std::optional<PreTokenizerKind> pre_tokenizer_from_name(std::string_view name) {
  static constexpr std::array<std::string_view, 9> kLlama3 = {
      "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"};
  static constexpr std::array<std::string_view, 6> kQwen2 = {"qwen2",   "deepseek-r1-qwen", "kormo",
                                                             "f2llmv2", "megrez",           "stablelm2"};
  static constexpr std::array<std::string_view, 7> kSmolLM = {"smollm",    "starcoder", "refact",    "command-r",
                                                              "codeshell", "exaone",    "minerva-7b"};
  static constexpr std::array<std::string_view, 5> kGpt2 = {"gpt-2", "phi-2", "gigachat", "mellum", "exaone4"};
  const auto in = [&](const auto& names) { return std::find(names.begin(), names.end(), name) != names.end(); };
  if (in(kLlama3)) return PreTokenizerKind::kLlama3;
  if (in(kQwen2)) return PreTokenizerKind::kQwen2;
  if (in(kSmolLM)) return PreTokenizerKind::kSmolLM;
  if (in(kGpt2)) return PreTokenizerKind::kGpt2;
  if (name == "default" || name.empty()) return PreTokenizerKind::kDefault;
  return std::nullopt;
}

std::vector<uint32_t> split_words(PreTokenizerKind kind, std::span<const char32_t> cps) {
  if (cps.empty()) return {};
  std::vector<uint8_t> facts(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) facts[i] = facts_of(cps[i]);

  std::vector<uint32_t> pieces = {static_cast<uint32_t>(cps.size())};
  const auto is_number = [&](size_t pos) { return (facts[pos] & kNumber) != 0; };
  const auto is_ascii_digit = [&](size_t pos) { return cps[pos] >= '0' && cps[pos] <= '9'; };

  // Runs one matcher over every current piece.
  const auto run_matcher = [&](auto&& split_piece) {
    std::vector<uint32_t> words;
    words.reserve(cps.size() / 3 + 1);
    size_t begin = 0;
    for (const uint32_t length : pieces) {
      PieceSplitter splitter(cps, facts, begin, begin + length, words);
      split_piece(splitter);
      begin += length;
    }
    pieces = std::move(words);
  };
  const auto gpt2 = [](PieceSplitter& s) { s.split_gpt2(); };

  switch (kind) {
    case PreTokenizerKind::kGpt2: run_matcher(gpt2); break;
    case PreTokenizerKind::kSmolLM:
      pieces = isolate_runs(pieces, is_number, /*max_run=*/1);
      run_matcher(gpt2);
      break;
    case PreTokenizerKind::kLlama3:
      run_matcher([](PieceSplitter& s) { s.split_llama3(/*digits_in_threes=*/true); });
      break;
    case PreTokenizerKind::kQwen2:
      run_matcher([](PieceSplitter& s) { s.split_llama3(/*digits_in_threes=*/false); });
      break;
    case PreTokenizerKind::kDefault:
      pieces = isolate_runs(pieces, [&](size_t pos) { return is_default_punct(cps[pos], facts[pos]); });
      run_matcher(gpt2);
      pieces = isolate_runs(pieces, is_number);
      pieces = isolate_runs(pieces, is_ascii_digit, /*max_run=*/3);
      break;
  }
  return pieces;
}

}  // namespace folio
