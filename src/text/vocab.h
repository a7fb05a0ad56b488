// The token table shared by both tokenizer algorithms: texts as GGUF stores them, scores,
// attributes, and a text -> id map that can be queried with a string_view (no allocation).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace folio {

// Bit flags; tokenizer.ggml.token_type values map to one each (1 normal, 2 unknown, 3 control,
// 4 user-defined, 5 unused, 6 byte; anything else: no flag).
enum TokenAttr : uint8_t {
  kAttrNormal = 1,
  kAttrUnknown = 2,
  kAttrControl = 4,
  kAttrUserDefined = 8,
  kAttrUnused = 16,
  kAttrByte = 32,
};

inline uint8_t token_attr_from_type(int64_t token_type) {
  switch (token_type) {
    case 1: return kAttrNormal;
    case 2: return kAttrUnknown;
    case 3: return kAttrControl;
    case 4: return kAttrUserDefined;
    case 5: return kAttrUnused;
    case 6: return kAttrByte;
    default: return 0;
  }
}

struct TransparentStringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct Vocab {
  std::vector<std::string> texts;  // [n_tokens]
  std::vector<float> scores;       // [n_tokens]; SentencePiece merge priorities
  std::vector<uint8_t> attrs;      // [n_tokens]; TokenAttr flags
  std::unordered_map<std::string, int32_t, TransparentStringHash, std::equal_to<>> text_to_id;

  int32_t size() const { return static_cast<int32_t>(texts.size()); }
  bool contains(int32_t id) const { return id >= 0 && id < size(); }
  bool has_attr(int32_t id, uint8_t attr) const { return contains(id) && (attrs[id] & attr); }
  // -1 when no token has exactly this text.
  int32_t find(std::string_view text) const {
    const auto it = text_to_id.find(text);
    return it == text_to_id.end() ? -1 : it->second;
  }
};

}  // namespace folio
