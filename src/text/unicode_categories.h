// Unicode general categories, reduced to the classes that pre-tokenizer regexes ask about
// (\p{L}, \p{N}, \s, ...). The data is Unicode 15.1, the version llama.cpp's tables follow, so
// that words split exactly where llama.cpp splits them.
#pragma once

#include <cstdint>

namespace folio {

// Values are fixed: src/text/unicode_category_table.inc stores them.
enum class CodepointClass : uint8_t {
  kUnassigned = 0,   // Cn, and any value above U+10FFFF
  kNumber = 1,       // Nd Nl No
  kLetter = 2,       // Lu Ll Lt Lm Lo
  kSeparator = 3,    // Zs Zl Zp
  kMark = 4,         // Mn Mc Me
  kPunctuation = 5,  // Pc Pd Ps Pe Pi Pf Po
  kSymbol = 6,       // Sm Sc Sk So
  kControl = 7,      // Cc Cf Cs Co
};

CodepointClass codepoint_class(char32_t cp);

// The White_Space property (what \s matches in Unicode-aware regex engines).
bool is_unicode_whitespace(char32_t cp);

}  // namespace folio
