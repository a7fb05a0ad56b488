#include "text/text_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace folio {

struct TextRegex::Compiled {
  std::string pattern;
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof(buffer)) < 0) return "error " + std::to_string(code);
  return reinterpret_cast<const char*>(buffer);
}

size_t next_char(std::string_view s, size_t at) {
  ++at;
  while (at < s.size() && (static_cast<uint8_t>(s[at]) & 0xC0) == 0x80) ++at;
  return at;
}

}  // namespace

struct RegexScratch::State {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
};

RegexScratch::RegexScratch() : state_(std::make_unique<State>()) {
  // Only the whole match is read: one ovector pair serves every pattern.
  state_->data = pcre2_match_data_create(1, nullptr);
  state_->context = pcre2_match_context_create(nullptr);
  state_->stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_jit_stack_assign(state_->context, nullptr, state_->stack);
}

RegexScratch::~RegexScratch() {
  pcre2_jit_stack_free(state_->stack);
  pcre2_match_context_free(state_->context);
  pcre2_match_data_free(state_->data);
}

Expected<TextRegex> TextRegex::compile(std::string_view pattern) {
  return build(pattern, pattern);
}

Expected<TextRegex> TextRegex::build(std::string_view pattern, std::string_view shown) {
  auto compiled = std::make_shared<Compiled>();
  compiled->pattern = std::string(shown);
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                                 &error, &error_offset, nullptr);
  if (compiled->code == nullptr) {
    return Status::error("regex '" + compiled->pattern + "' does not compile at offset " +
                         std::to_string(error_offset) + ": " + pcre2_message(error));
  }
  compiled->jit = pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE) == 0;
  return TextRegex(std::move(compiled));
}

Expected<TextRegex> TextRegex::compile_oniguruma(std::string_view pattern) {
  constexpr std::string_view kWord = "\\p{L}\\p{M}\\p{Nd}\\p{Pc}";
  std::string translated;
  int class_depth = 0;
  bool quoted = false;  // inside \Q...\E
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (quoted) {
      translated.push_back(c);
      if (c == '\\' && i + 1 < pattern.size() && pattern[i + 1] == 'E') {
        translated.push_back('E');
        ++i;
        quoted = false;
      }
      continue;
    }
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 'w') {
        translated += class_depth > 0 ? std::string(kWord) : "[" + std::string(kWord) + "]";
      } else if (next == 'W' && class_depth == 0) {
        translated += "[^" + std::string(kWord) + "]";
      } else {
        if (next == 'Q') quoted = true;
        translated.push_back(c);
        translated.push_back(next);
      }
      continue;
    }
    if (c == '[') {
      if (class_depth > 0 && i + 1 < pattern.size() && pattern[i + 1] == ':') {
        // A POSIX class such as [:alpha:]: copied through its closing ":]".
        const size_t close = pattern.find(":]", i + 2);
        if (close != std::string_view::npos) {
          translated.append(pattern.substr(i, close + 2 - i));
          i = close + 1;
          continue;
        }
      }
      ++class_depth;
      translated.push_back(c);
      // A ']' right after '[' or '[^' is a literal member, not the end.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') translated.push_back(pattern[++i]);
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') translated.push_back(pattern[++i]);
      continue;
    }
    if (c == ']' && class_depth > 0) --class_depth;
    translated.push_back(c);
  }
  // Errors and pattern() name the pattern as the file spells it.
  return build(translated, pattern);
}

Expected<TextRegex> TextRegex::literal(std::string_view literal) {
  // \Q...\E quotes everything except a literal "\E", which is spelled outside the quotes.
  std::string pattern = "\\Q";
  for (size_t i = 0; i < literal.size(); ++i) {
    if (literal.compare(i, 2, "\\E") == 0) {
      pattern += "\\E\\\\E\\Q";
      ++i;
    } else {
      pattern.push_back(literal[i]);
    }
  }
  pattern += "\\E";
  return compile(pattern);
}

Expected<std::vector<RegexMatch>> TextRegex::find_all(std::string_view subject) const {
  RegexScratch scratch;
  std::vector<RegexMatch> matches;
  if (Status s = find_all(subject, scratch, matches); !s) return s;
  return matches;
}

Status TextRegex::find_all(std::string_view subject, RegexScratch& scratch, std::vector<RegexMatch>& out) const {
  out.clear();
  const Compiled& c = *compiled_;
  RegexScratch::State& state = scratch.state();
  const auto* text = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t at = 0;
  size_t last_end = SIZE_MAX;
  while (at <= subject.size()) {
    // rc 0: the ovector holds only the whole match, which is all that is read.
    const int rc = c.jit ? pcre2_jit_match(c.code, text, subject.size(), at, 0, state.data, state.context)
                         : pcre2_match(c.code, text, subject.size(), at, PCRE2_NO_UTF_CHECK, state.data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) return Status::error("regex '" + c.pattern + "': " + pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    const size_t begin = ovector[0], end = ovector[1];
    if (begin == end) {
      if (begin != last_end) out.push_back({begin, end});
      if (begin >= subject.size()) break;
      at = next_char(subject, begin);
      last_end = SIZE_MAX;
      continue;
    }
    out.push_back({begin, end});
    at = last_end = end;
  }
  return Status::ok();
}

const std::string& TextRegex::pattern() const {
  return compiled_->pattern;
}

bool TextRegex::jit() const {
  return compiled_->jit;
}

}  // namespace folio
