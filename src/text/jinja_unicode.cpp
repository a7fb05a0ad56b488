#include "text/jinja_unicode.h"

#include <algorithm>

namespace folio::jinja {

std::vector<char32_t> decode_utf8(std::string_view text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    int length = byte < 0x80 ? 1 : (byte >> 5) == 6 ? 2 : (byte >> 4) == 14 ? 3 : (byte >> 3) == 30 ? 4 : 0;
    char32_t c = length == 1 ? byte : length == 2 ? (byte & 0x1F) : length == 3 ? (byte & 0x0F) : (byte & 0x07);
    bool valid = length > 0 && i + length <= text.size();
    for (int k = 1; valid && k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      valid = (next & 0xC0) == 0x80;
      c = (c << 6) | (next & 0x3F);
    }
    if (!valid) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(c);
    i += length;
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::string encode_utf8(std::u32string_view code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (char32_t c : code_points) append_utf8(out, c);
  return out;
}

size_t count_code_points(std::string_view text) {
  size_t count = 0;
  for (char c : text) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

namespace {

char32_t lower_of(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0xC0) return c;
  if (c <= 0xDE) return c == 0xD7 ? c : c + 32;
  if ((c >= 0x100 && c <= 0x137 && c % 2 == 0 && c != 0x130) || (c >= 0x139 && c <= 0x148 && c % 2 == 1) ||
      (c >= 0x14A && c <= 0x177 && c % 2 == 0) || (c >= 0x179 && c <= 0x17E && c % 2 == 1))
    return c + 1;
  if (c == 0x178) return 0xFF;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 37;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 63;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

char32_t upper_of(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0xB5) return c;
  if (c == 0xB5) return 0x39C;
  if (c >= 0xE0 && c <= 0xFE) return c == 0xF7 ? c : c - 32;
  if (c == 0xFF) return 0x178;
  if (c == 0x131) return 'I';
  if ((c >= 0x101 && c <= 0x137 && c % 2 == 1) || (c >= 0x13A && c <= 0x148 && c % 2 == 0) ||
      (c >= 0x14B && c <= 0x177 && c % 2 == 1) || (c >= 0x17A && c <= 0x17E && c % 2 == 0))
    return c - 1;
  if (c >= 0x3B1 && c <= 0x3C9) return c == 0x3C2 ? 0x3A3 : c - 32;
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 37;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 63;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

bool is_cased(char32_t c) {
  return lower_of(c) != c || upper_of(c) != c || c == 0xDF;
}

void append_mapped(std::string& out, char32_t c, bool upper) {
  if (upper && c == 0xDF) {
    out += "SS";  // the one special casing Latin text meets
  } else if (!upper && c == 0x130) {
    out += "i\xCC\x87";  // İ -> i + combining dot above
  } else {
    append_utf8(out, upper ? upper_of(c) : lower_of(c));
  }
}

}  // namespace

std::string change_case(std::string_view text, CaseMapping mapping) {
  std::string out;
  out.reserve(text.size());
  bool previous_cased = false;  // str.title(): inside a run of cased letters
  bool word_start = true;       // jinja2 title: after a separator
  bool first = true;            // str.capitalize(): first character
  for (char32_t c : decode_utf8(text)) {
    switch (mapping) {
      case CaseMapping::kLower: append_mapped(out, c, false); break;
      case CaseMapping::kUpper: append_mapped(out, c, true); break;
      case CaseMapping::kCapitalize: append_mapped(out, c, first); break;
      case CaseMapping::kTitle:
        append_mapped(out, c, !previous_cased);
        previous_cased = is_cased(c);
        break;
      case CaseMapping::kJinjaTitle: {
        // jinja2 splits on runs of [-\s({[<] and capitalizes each piece.
        const bool separator = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_python_space(c);
        if (separator) {
          append_utf8(out, c);
        } else {
          append_mapped(out, c, word_start);
        }
        word_start = separator;
        break;
      }
    }
    first = false;
  }
  return out;
}

std::string python_strip(std::string_view text, const std::string* chars, bool left, bool right) {
  const std::vector<char32_t> cps = decode_utf8(text);
  std::vector<char32_t> strip_set;
  if (chars) strip_set = decode_utf8(*chars);
  auto strippable = [&](char32_t c) {
    return chars ? std::find(strip_set.begin(), strip_set.end(), c) != strip_set.end() : is_python_space(c);
  };
  size_t begin = 0, end = cps.size();
  while (left && begin < end && strippable(cps[begin])) ++begin;
  while (right && end > begin && strippable(cps[end - 1])) --end;
  return encode_utf8(std::u32string_view(cps.data() + begin, end - begin));
}

}  // namespace folio::jinja
