// libFuzzer target: a tokenizer.json and a text, both untrusted. The input is split at its
// first 0xFF byte (which valid JSON never holds): the bytes before are the tokenizer.json, the
// bytes after the text. Loading must return a tokenizer or a Status; an accepted tokenizer
// must encode the text (special tokens parsed and not) to ids inside its vocabulary, and decode
// any ids, never crashing, hanging or tripping a sanitizer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "text/hf_tokenizer_files.h"
#include "text/tokenizer.h"

namespace {

void require(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t cut = input.find('\xFF');
  folio::HfTokenizerFiles files;
  files.tokenizer_json = std::string(input.substr(0, cut));
  const std::string_view text = cut == std::string_view::npos ? std::string_view() : input.substr(cut + 1);
  folio::Expected<folio::Tokenizer> tokenizer = folio::Tokenizer::from_hf(files);
  if (!tokenizer) {
    require(!tokenizer.error().empty());
    return 0;
  }
  for (const bool special : {false, true}) {
    const std::vector<int32_t> ids = tokenizer->encode(text, /*add_special=*/true, special);
    for (const int32_t id : ids) require(id >= 0 && id < tokenizer->vocab_size());
    (void)tokenizer->decode(ids);
    (void)tokenizer->decode(ids, /*skip_special=*/true);
  }
  // Arbitrary ids, some outside the vocabulary, decode too.
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 1 < text.size() && ids.size() < 64; i += 2) {
    ids.push_back(static_cast<int32_t>((static_cast<uint8_t>(text[i]) << 8) | static_cast<uint8_t>(text[i + 1])) - 8);
  }
  (void)tokenizer->decode(ids);
  (void)tokenizer->contains_control_text(text);
  return 0;
}
