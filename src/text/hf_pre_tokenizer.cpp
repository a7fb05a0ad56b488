#include "text/hf_pre_tokenizer.h"

#include <nlohmann/json.hpp>

#include "text/byte_level.h"
#include "text/unicode_categories.h"
#include "text/unicode_utf8.h"

namespace folio::hf {
namespace {

using nlohmann::json;

// GPT-2's pattern, which ByteLevel with use_regex splits by.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// A cut of a piece: a byte range relative to the piece, and whether it matched the pattern.
struct Cut {
  size_t begin, end;
  bool is_match;
};

std::string type_of(const json& spec) {
  const auto it = spec.find("type");
  return it != spec.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// What tokenizers' Pattern::find_matches gives for a list of matches: matches and the gaps
// between them, in order, covering the piece.
void cuts_from_matches(const std::vector<RegexMatch>& matches, size_t size, std::vector<Cut>& cuts) {
  cuts.clear();
  if (size == 0) {
    cuts.push_back({0, 0, false});
    return;
  }
  size_t prev = 0;
  for (const RegexMatch& m : matches) {
    if (prev != m.begin) cuts.push_back({prev, m.begin, false});
    cuts.push_back({m.begin, m.end, true});
    prev = m.end;
  }
  if (prev != size) cuts.push_back({prev, size, false});
}

// The same for a character predicate: every character it accepts is a match of its own.
template <typename Pred>
void cuts_from_chars(std::string_view s, Pred accept, std::vector<Cut>& cuts) {
  cuts.clear();
  if (s.empty()) {
    cuts.push_back({0, 0, false});
    return;
  }
  size_t last = 0;
  for (size_t at = 0; at < s.size();) {
    const Utf8Step step = next_utf8_step(s.substr(at));
    const size_t n = step.length;
    const std::vector<char32_t> cp = decode_utf8_lenient(s.substr(at, n));
    if (accept(cp.empty() ? kReplacementChar : cp[0])) {
      if (last < at) cuts.push_back({last, at, false});
      cuts.push_back({at, at + n, true});
      last = at + n;
    }
    at += n;
  }
  if (last < s.size()) cuts.push_back({last, s.size(), false});
}

// Bytes of a code point's UTF-8 form (the text is valid UTF-8, so decoding is exact).
size_t utf8_bytes(char32_t cp) {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

// The hand-written matcher's words as cuts (the words tile the piece, as the regex's matches
// do for these patterns: every character is matched by some alternative).
void cuts_from_fast(PreTokenizerKind kind, std::string_view s, std::vector<Cut>& cuts) {
  cuts.clear();
  if (s.empty()) {
    cuts.push_back({0, 0, false});
    return;
  }
  const std::vector<char32_t> cps = decode_utf8_lenient(s);
  size_t at = 0, cp = 0;
  for (const uint32_t length : split_words(kind, cps)) {
    size_t bytes = 0;
    for (size_t i = cp; i < cp + length; ++i) bytes += utf8_bytes(cps[i]);
    cuts.push_back({at, at + bytes, true});
    at += bytes;
    cp += length;
  }
}

// Applies a behavior (tokenizers' NormalizedString::split) and appends the kept, non-empty
// sub-pieces of `piece` to `out`.
void apply_behavior(const PieceList::Piece& piece, std::vector<Cut>& cuts, SplitBehavior behavior, bool invert,
                    std::vector<PieceList::Piece>& out) {
  if (invert) {
    for (Cut& c : cuts) c.is_match = !c.is_match;
  }
  // (begin, end, remove)
  std::vector<Cut> splits;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Cut& c : cuts) splits.push_back({c.begin, c.end, false});
      break;
    case SplitBehavior::kRemoved: splits = cuts; break;
    case SplitBehavior::kContiguous: {
      bool previous = false;
      for (const Cut& c : cuts) {
        if (c.is_match == previous && !splits.empty()) {
          splits.back().end = c.end;
        } else {
          splits.push_back({c.begin, c.end, false});
        }
        previous = c.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool previous = false;
      for (const Cut& c : cuts) {
        if (c.is_match && !previous && !splits.empty()) {
          splits.back().end = c.end;
        } else {
          splits.push_back({c.begin, c.end, false});
        }
        previous = c.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous = false;
      for (size_t i = cuts.size(); i-- > 0;) {
        const Cut& c = cuts[i];
        if (c.is_match && !previous && !splits.empty()) {
          splits.back().begin = c.begin;
        } else {
          splits.push_back({c.begin, c.end, false});
        }
        previous = c.is_match;
      }
      std::reverse(splits.begin(), splits.end());
      break;
    }
  }
  for (const Cut& s : splits) {
    if (s.is_match /* remove */ || s.begin == s.end) continue;
    out.push_back({piece.begin + s.begin, piece.begin + s.end, piece.at_start && s.begin == 0});
  }
}

// Rewrites every piece through fn(piece text, at_start, out) into a new buffer.
template <typename Fn>
void transform(PieceList& list, Fn fn) {
  std::string text;
  text.reserve(list.text.size() + list.text.size() / 2);
  for (PieceList::Piece& p : list.pieces) {
    const size_t begin = text.size();
    fn(list.view(p), p.at_start, text);
    p.begin = begin;
    p.end = text.size();
  }
  list.text = std::move(text);
}

}  // namespace

std::optional<SplitBehavior> split_behavior_from_name(std::string_view name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return std::nullopt;
}

std::optional<PreTokenizerKind> fast_matcher_for(std::string_view regex) {
  if (regex == kGpt2Pattern) return PreTokenizerKind::kGpt2;
  if (regex == kLlama3Pattern) return PreTokenizerKind::kLlama3;
  if (regex == kQwen2Pattern) return PreTokenizerKind::kQwen2;
  return std::nullopt;
}

Status PreTokenizer::add(const json& spec, std::vector<Step>& steps) {
  if (spec.is_null()) return Status::ok();
  if (!spec.is_object()) return Status::error("pre_tokenizer: expected an object, got " + spec.dump());
  const std::string type = type_of(spec);
  if (type == "Sequence") {
    const auto it = spec.find("pretokenizers");
    if (it == spec.end() || !it->is_array()) return Status::error("pre_tokenizer Sequence: no pretokenizers array");
    for (const json& child : *it) {
      if (Status s = add(child, steps); !s) return s;
    }
    return Status::ok();
  }
  Step step{};
  if (type == "ByteLevel") {
    step.kind = Step::Kind::kByteLevel;
    step.add_prefix_space = spec.value("add_prefix_space", true);
    step.use_regex = spec.value("use_regex", true);
    if (step.use_regex) {
      Expected<TextRegex> regex = TextRegex::compile_oniguruma(kGpt2Pattern);
      if (!regex) return regex.status();
      step.regex = std::move(regex).value();
      step.fast = PreTokenizerKind::kGpt2;
    }
  } else if (type == "Split") {
    step.kind = Step::Kind::kSplit;
    const auto pattern = spec.find("pattern");
    if (pattern == spec.end() || !pattern->is_object()) return Status::error("pre_tokenizer Split: no pattern object");
    Expected<TextRegex> regex = Status::error("pre_tokenizer Split: pattern " + pattern->dump() +
                                              " is neither {\"String\": ...} nor {\"Regex\": ...}");
    if (pattern->contains("String") && (*pattern)["String"].is_string()) {
      regex = TextRegex::literal((*pattern)["String"].get<std::string>());
    } else if (pattern->contains("Regex") && (*pattern)["Regex"].is_string()) {
      const std::string source = (*pattern)["Regex"].get<std::string>();
      regex = TextRegex::compile_oniguruma(source);
      step.fast = fast_matcher_for(source);
    }
    if (!regex) return Status::error("pre_tokenizer Split: " + regex.error());
    step.regex = std::move(regex).value();
    const std::string behavior = spec.value("behavior", std::string());
    const std::optional<SplitBehavior> b = split_behavior_from_name(behavior);
    if (!b) return Status::error("pre_tokenizer Split: unknown behavior '" + behavior + "'");
    step.behavior = *b;
    step.invert = spec.value("invert", false);
  } else if (type == "Digits") {
    step.kind = Step::Kind::kDigits;
    step.individual_digits = spec.value("individual_digits", false);
  } else if (type == "Metaspace") {
    step.kind = Step::Kind::kMetaspace;
    step.replacement = spec.value("replacement", std::string("\xE2\x96\x81"));
    if (decode_utf8_lenient(step.replacement).size() != 1) {
      return Status::error("pre_tokenizer Metaspace: replacement '" + step.replacement + "' is not one character");
    }
    const std::string scheme = spec.value("prepend_scheme", std::string("always"));
    if (scheme == "always") {
      step.prepend = PrependScheme::kAlways;
    } else if (scheme == "first") {
      step.prepend = PrependScheme::kFirst;
    } else if (scheme == "never") {
      step.prepend = PrependScheme::kNever;
    } else {
      return Status::error("pre_tokenizer Metaspace: unknown prepend_scheme '" + scheme + "'");
    }
    if (spec.contains("add_prefix_space") && spec["add_prefix_space"] == false) step.prepend = PrependScheme::kNever;
    step.split = spec.value("split", true);
  } else if (type == "WhitespaceSplit") {
    step.kind = Step::Kind::kWhitespaceSplit;
  } else {
    return Status::error("pre_tokenizer '" + (type.empty() ? spec.dump() : type) +
                         "' is not supported (folio implements Sequence, ByteLevel, Split, Digits, Metaspace, "
                         "WhitespaceSplit)");
  }
  steps.push_back(std::move(step));
  return Status::ok();
}

Expected<PreTokenizer> PreTokenizer::parse(const json& spec) {
  PreTokenizer p;
  if (Status s = add(spec, p.steps_); !s) return s;
  return p;
}

bool PreTokenizer::byte_level() const {
  for (const Step& s : steps_) {
    if (s.kind == Step::Kind::kByteLevel) return true;
  }
  return false;
}

Status PreTokenizer::run(PieceList& pieces, RegexScratch& scratch, bool use_fast_paths) const {
  for (const Step& step : steps_) {
    if (Status s = run_step(step, pieces, scratch, use_fast_paths); !s) return s;
  }
  return Status::ok();
}

Status PreTokenizer::run_step(const Step& step, PieceList& list, RegexScratch& scratch, bool use_fast_paths) const {
  std::vector<PieceList::Piece> out;
  out.reserve(list.pieces.size() * 2);
  std::vector<Cut> cuts;
  std::vector<RegexMatch> matches;
  // Splits every piece by the step's regex (or its fast matcher).
  const auto split_by_regex = [&](SplitBehavior behavior, bool invert) -> Status {
    for (const PieceList::Piece& p : list.pieces) {
      const std::string_view s = list.view(p);
      if (use_fast_paths && step.fast) {
        cuts_from_fast(*step.fast, s, cuts);
      } else {
        if (Status st = step.regex->find_all(s, scratch, matches); !st) return st;
        cuts_from_matches(matches, s.size(), cuts);
      }
      apply_behavior(p, cuts, behavior, invert, out);
    }
    list.pieces = std::move(out);
    return Status::ok();
  };
  const auto split_by_chars = [&](auto accept, SplitBehavior behavior) {
    for (const PieceList::Piece& p : list.pieces) {
      cuts_from_chars(list.view(p), accept, cuts);
      apply_behavior(p, cuts, behavior, false, out);
    }
    list.pieces = std::move(out);
  };

  switch (step.kind) {
    case Step::Kind::kByteLevel:
      if (step.add_prefix_space) {
        transform(list, [](std::string_view s, bool, std::string& text) {
          if (!s.starts_with(' ')) text.push_back(' ');
          text.append(s);
        });
      }
      if (step.use_regex) {
        if (Status s = split_by_regex(SplitBehavior::kIsolated, false); !s) return s;
      }
      transform(list, [](std::string_view s, bool, std::string& text) { append_byte_level(text, s); });
      return Status::ok();
    case Step::Kind::kSplit: return split_by_regex(step.behavior, step.invert);
    case Step::Kind::kDigits:
      split_by_chars([](char32_t cp) { return codepoint_class(cp) == CodepointClass::kNumber; },
                     step.individual_digits ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
      return Status::ok();
    case Step::Kind::kWhitespaceSplit:
      split_by_chars([](char32_t cp) { return is_unicode_whitespace(cp); }, SplitBehavior::kRemoved);
      return Status::ok();
    case Step::Kind::kMetaspace: {
      const std::string& r = step.replacement;
      transform(list, [&](std::string_view s, bool at_start, std::string& text) {
        const size_t begin = text.size();
        for (const char c : s) {
          if (c == ' ') {
            text.append(r);
          } else {
            text.push_back(c);
          }
        }
        const bool starts = std::string_view(text).substr(begin).starts_with(r);
        if (!starts &&
            (step.prepend == PrependScheme::kAlways || (step.prepend == PrependScheme::kFirst && at_start))) {
          text.insert(begin, r);
        }
      });
      if (step.split) {
        const char32_t rcp = decode_utf8_lenient(r)[0];
        split_by_chars([rcp](char32_t cp) { return cp == rcp; }, SplitBehavior::kMergedWithNext);
      }
      return Status::ok();
    }
  }
  return Status::ok();
}

}  // namespace folio::hf
