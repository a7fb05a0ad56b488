// A tokenizer.json run as Hugging Face tokenizers runs it, behind Tokenizer (TokenizerKind::
// kHuggingFace). Internal to src/text/: users go through tokenizer.h.
//
// Encoding follows tokenizers' steps:
//   1. added tokens whose text is not normalized are cut out of the raw input (hf_added_tokens.h);
//   2. each remaining piece is normalized (hf_normalizer.h), and the normalized added tokens
//      cut out of it;
//   3. each remaining piece is cut into words (hf_pre_tokenizer.h), each word encoded by the
//      BPE model (hf_bpe.h);
//   4. with add_special, the post-processor's template puts BOS / EOS around the whole.
// Input that is not valid UTF-8 is first made valid as Python's decode(errors="replace") makes
// it (the library only takes str), each ill-formed subpart one U+FFFD.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "text/hf_added_tokens.h"
#include "text/hf_bpe.h"
#include "text/hf_decoder.h"
#include "text/hf_normalizer.h"
#include "text/hf_pre_tokenizer.h"
#include "text/hf_tokenizer_files.h"
#include "text/tokenizer.h"

namespace folio::hf {

struct Pipeline {
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  Bpe model;
  Decoder decoder;
  std::vector<AddedToken> added_tokens;
  AddedTokenMatcher raw_matcher;         // added tokens with normalized = false
  AddedTokenMatcher normalized_matcher;  // the others, by their normalized texts
  std::vector<int32_t> prefix, suffix;   // the post-processor's single-sequence template
  std::vector<bool> special;             // [n_tokens]: added with special = true (decode skips them)
};

Expected<std::shared_ptr<Tokenizer::State>> load_state(const HfTokenizerFiles& files);

void encode(const Tokenizer::State& state, std::string_view text, bool add_special, bool parse_special,
            std::span<const TextSpan> literal_spans, std::vector<int32_t>& out);
std::string decode(const Tokenizer::State& state, std::span<const int32_t> ids, bool skip_special);
// Whether the text holds a special added token's text.
bool contains_special_text(const Tokenizer::State& state, std::string_view text);

}  // namespace folio::hf
