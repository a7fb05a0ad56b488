#include "text/byte_level.h"

#include <array>

#include "text/unicode_utf8.h"

namespace folio {
namespace {

bool maps_to_itself(uint32_t byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
}

struct ByteTables {
  std::array<char32_t, 256> to_unicode{};
  std::array<int16_t, 0x144> to_byte{};  // indexed by code point; -1 outside the alphabet
  ByteTables() {
    to_byte.fill(-1);
    uint32_t next_extra = 0x100;
    for (uint32_t b = 0; b < 256; ++b) {
      to_unicode[b] = maps_to_itself(b) ? b : next_extra++;
      to_byte[to_unicode[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& tables() {
  static const ByteTables kTables;
  return kTables;
}

}  // namespace

char32_t byte_to_unicode(uint8_t byte) {
  return tables().to_unicode[byte];
}

std::optional<uint8_t> unicode_to_byte(char32_t cp) {
  if (cp >= tables().to_byte.size() || tables().to_byte[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(tables().to_byte[cp]);
}

void append_byte_level(std::string& out, std::string_view raw) {
  for (const char c : raw) append_utf8(out, byte_to_unicode(static_cast<uint8_t>(c)));
}

std::string byte_level_to_bytes(std::string_view token_text) {
  std::string out;
  out.reserve(token_text.size());
  for (const char32_t cp : decode_utf8_lenient(token_text)) {
    if (const auto byte = unicode_to_byte(cp)) {
      out.push_back(static_cast<char>(*byte));
    } else {
      append_utf8(out, cp);
    }
  }
  return out;
}

}  // namespace folio
