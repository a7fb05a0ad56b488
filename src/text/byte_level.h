// GPT-2's byte-level alphabet: byte-level BPE vocabularies spell every byte as one printable
// code point (printable Latin-1 bytes as themselves, the other 68 bytes as U+0100..U+0143), so
// token texts never hold raw control bytes or spaces ("Ġ" is the space byte 0x20).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace folio {

char32_t byte_to_unicode(uint8_t byte);
std::optional<uint8_t> unicode_to_byte(char32_t cp);

// Appends the alphabet's spelling of each byte of raw.
void append_byte_level(std::string& out, std::string_view raw);

// Turns a token text back into the bytes it spells. A code point outside the alphabet (only
// in malformed vocabularies) is kept as its own UTF-8 bytes.
std::string byte_level_to_bytes(std::string_view token_text);

}  // namespace folio
