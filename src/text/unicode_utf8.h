// UTF-8 helpers. Two decoders on purpose:
//  - the lenient one reproduces how llama.cpp reads tokenizer input, so that ids match it even
//    on malformed text (each byte that does not start a well-formed-looking sequence becomes
//    U+FFFD; overlong forms and surrogates are let through as llama.cpp lets them through);
//  - the strict one (RFC 3629) decides what is safe to hand to a client.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace folio {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Sequence length announced by a lead byte, judged by its high nibble only (continuation and
// 0xF8..0xFF bytes count as 1). This is how SentencePiece-style tokenizers cut text into
// symbols before looking anything up.
inline size_t utf8_length_from_lead(uint8_t lead) {
  static constexpr uint8_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[lead >> 4];
}

// Lenient decode (see above). Values past U+10FFFF, which lead bytes 0xF5..0xF7 can announce,
// become U+FFFD for their first byte.
std::vector<char32_t> decode_utf8_lenient(std::string_view text);

// Appends the UTF-8 form of cp (cp <= 0x10FFFF; surrogates are encoded as-is).
void append_utf8(std::string& out, char32_t cp);

// What the front of some bytes holds, under strict UTF-8.
struct Utf8Step {
  enum class Kind {
    kChar,        // `length` bytes form one valid character
    kInvalid,     // `length` bytes (the maximal ill-formed subpart, >= 1) stand for one U+FFFD
    kIncomplete,  // all the bytes are a valid start of a character that needs more bytes
  };
  Kind kind;
  size_t length;
};
Utf8Step next_utf8_step(std::string_view bytes);  // bytes must not be empty

bool is_valid_utf8(std::string_view bytes);

// Replaces every ill-formed subpart (and an incomplete tail) with U+FFFD.
std::string sanitize_utf8(std::string_view bytes);

}  // namespace folio
