// A compiled regular expression over UTF-8 text: PCRE2 with Unicode properties (\p{L}, \p{N})
// and Unicode-aware \s, \w and case folding, JIT-compiled where the platform allows. This is
// what runs the Split patterns of a tokenizer.json that no hand-written matcher stands for;
// Hugging Face tokenizers runs them with Oniguruma, whose syntax for these patterns PCRE2
// shares.
//
// A TextRegex is immutable and may be used from any number of threads at once; each thread
// matches with its own RegexScratch.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace folio {

struct RegexMatch {
  size_t begin = 0;  // byte offsets into the subject
  size_t end = 0;
};

// Match state (PCRE2 match data and a JIT stack that may grow to 8 MiB, since the 32 KiB
// default is too small for patterns such as \s+(?!\S) on long runs). One per thread, reused
// across calls and patterns.
class RegexScratch {
 public:
  RegexScratch();
  ~RegexScratch();
  RegexScratch(const RegexScratch&) = delete;
  RegexScratch& operator=(const RegexScratch&) = delete;

  struct State;
  State& state() { return *state_; }

 private:
  std::unique_ptr<State> state_;
};

class TextRegex {
 public:
  // An error names the pattern and where in it compiling failed.
  static Expected<TextRegex> compile(std::string_view pattern);
  // A pattern as Oniguruma reads it (tokenizer.json's regexes run on Oniguruma in Hugging Face
  // tokenizers). The one difference these patterns meet is \w: Oniguruma's is letters, marks,
  // decimal digits and connector punctuation, PCRE2 10.42's letters, all numbers and "_", so
  // \w and \W (outside a bracket class) are spelled out as Oniguruma means them.
  static Expected<TextRegex> compile_oniguruma(std::string_view pattern);
  // A pattern that matches `literal` exactly (a Split or Replace given as a plain string).
  static Expected<TextRegex> literal(std::string_view literal);

  // Every non-overlapping match, left to right, as the Rust regex and onig crates report them:
  // after an empty match the search resumes one character further, and an empty match right
  // where the previous match ended is not reported. `subject` must be valid UTF-8.
  // Returns an error only when matching itself fails (PCRE2's match or backtracking limits).
  Expected<std::vector<RegexMatch>> find_all(std::string_view subject) const;
  // The same into `out` (cleared first), with the caller's scratch.
  Status find_all(std::string_view subject, RegexScratch& scratch, std::vector<RegexMatch>& out) const;

  const std::string& pattern() const;
  bool jit() const;

  struct Compiled;

 private:
  explicit TextRegex(std::shared_ptr<const Compiled> compiled) : compiled_(std::move(compiled)) {}
  // Compiles `pattern`; errors and pattern() show `shown`.
  static Expected<TextRegex> build(std::string_view pattern, std::string_view shown);
  std::shared_ptr<const Compiled> compiled_;
};

}  // namespace folio
