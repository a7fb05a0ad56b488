#include "text/unicode_categories.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace folio {
namespace {

// Sorted by first code point; an entry's class holds up to the next entry's first code point.
constexpr uint32_t kRanges[] = {
#include "text/unicode_category_table.inc"
};

// ASCII is by far the most common input; answer it without a search.
constexpr std::array<CodepointClass, 128> make_ascii_classes() {
  std::array<CodepointClass, 128> classes{};
  size_t next = 0;
  for (uint32_t cp = 0; cp < 128; ++cp) {
    while (next + 1 < std::size(kRanges) && (kRanges[next + 1] >> 8) <= cp) ++next;
    classes[cp] = static_cast<CodepointClass>(kRanges[next] & 0xFF);
  }
  return classes;
}
constexpr std::array<CodepointClass, 128> kAsciiClasses = make_ascii_classes();

}  // namespace

CodepointClass codepoint_class(char32_t cp) {
  if (cp < 128) return kAsciiClasses[cp];
  if (cp > 0x10FFFF) return CodepointClass::kUnassigned;
  // First entry whose start is above cp, then step back one.
  const uint32_t key = (static_cast<uint32_t>(cp) << 8) | 0xFF;
  const uint32_t* it = std::upper_bound(std::begin(kRanges), std::end(kRanges), key);
  return static_cast<CodepointClass>(*(it - 1) & 0xFF);
}

bool is_unicode_whitespace(char32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000: return true;
    default: return cp >= 0x2000 && cp <= 0x200A;
  }
}

}  // namespace folio
