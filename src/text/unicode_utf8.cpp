#include "text/unicode_utf8.h"

namespace folio {

std::vector<char32_t> decode_utf8_lenient(std::string_view text) {
  std::vector<char32_t> cps;
  cps.reserve(text.size());
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const auto is_cont = [&](size_t i) { return i < text.size() && (byte(i) & 0xC0) == 0x80; };
  size_t i = 0;
  while (i < text.size()) {
    const uint8_t b0 = byte(i);
    char32_t cp = kReplacementChar;
    size_t length = 1;
    if (b0 < 0x80) {
      cp = b0;
    } else if ((b0 & 0xE0) == 0xC0 && is_cont(i + 1)) {
      cp = (char32_t(b0 & 0x1F) << 6) | (byte(i + 1) & 0x3F);
      length = 2;
    } else if ((b0 & 0xF0) == 0xE0 && is_cont(i + 1) && is_cont(i + 2)) {
      cp = (char32_t(b0 & 0x0F) << 12) | (char32_t(byte(i + 1) & 0x3F) << 6) | (byte(i + 2) & 0x3F);
      length = 3;
    } else if ((b0 & 0xF8) == 0xF0 && is_cont(i + 1) && is_cont(i + 2) && is_cont(i + 3)) {
      cp = (char32_t(b0 & 0x07) << 18) | (char32_t(byte(i + 1) & 0x3F) << 12) | (char32_t(byte(i + 2) & 0x3F) << 6) |
           (byte(i + 3) & 0x3F);
      length = 4;
      if (cp > 0x10FFFF) {
        cp = kReplacementChar;
        length = 1;
      }
    }
    cps.push_back(cp);
    i += length;
  }
  return cps;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

Utf8Step next_utf8_step(std::string_view bytes) {
  const uint8_t b0 = static_cast<uint8_t>(bytes[0]);
  if (b0 < 0x80) return {Utf8Step::Kind::kChar, 1};
  size_t need = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte (RFC 3629 table)
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlongs
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;  // no overlongs
    if (b0 == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
  } else {
    return {Utf8Step::Kind::kInvalid, 1};
  }
  for (size_t k = 1; k < need; ++k) {
    if (k >= bytes.size()) return {Utf8Step::Kind::kIncomplete, k};
    const uint8_t b = static_cast<uint8_t>(bytes[k]);
    const bool ok = k == 1 ? (b >= lo && b <= hi) : (b & 0xC0) == 0x80;
    if (!ok) return {Utf8Step::Kind::kInvalid, k};
  }
  return {Utf8Step::Kind::kChar, need};
}

bool is_valid_utf8(std::string_view bytes) {
  while (!bytes.empty()) {
    const Utf8Step step = next_utf8_step(bytes);
    if (step.kind != Utf8Step::Kind::kChar) return false;
    bytes.remove_prefix(step.length);
  }
  return true;
}

std::string sanitize_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  while (!bytes.empty()) {
    const Utf8Step step = next_utf8_step(bytes);
    if (step.kind == Utf8Step::Kind::kChar) {
      out.append(bytes.substr(0, step.length));
    } else {
      append_utf8(out, kReplacementChar);
    }
    bytes.remove_prefix(step.length);
  }
  return out;
}

}  // namespace folio
