// Unicode helpers for the Jinja interpreter: Python strings index, measure, strip and case
// by code point, while folio keeps text as UTF-8 bytes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace folio::jinja {

std::vector<char32_t> decode_utf8(std::string_view text);  // invalid bytes map to U+FFFD
std::string encode_utf8(std::u32string_view code_points);
void append_utf8(std::string& out, char32_t code_point);
size_t count_code_points(std::string_view text);
// Python str.isspace() for one code point.
bool is_python_space(char32_t c);
// Python's case mappings (str.lower/upper/title/capitalize) and jinja2's title filter, for
// ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic; other scripts pass through unchanged
// (no final-sigma rule, no special casing beyond German sharp s).
enum class CaseMapping { kLower, kUpper, kTitle, kCapitalize, kJinjaTitle };
std::string change_case(std::string_view text, CaseMapping mapping);
// Python str.strip()/lstrip()/rstrip(); chars == nullptr strips whitespace.
std::string python_strip(std::string_view text, const std::string* chars, bool left, bool right);

}  // namespace folio::jinja
