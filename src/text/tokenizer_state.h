// The immutable state behind a Tokenizer, and how it is built from tokenizer metadata. Internal to
// src/text/: users go through tokenizer.h.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "text/bpe_model.h"
#include "text/pre_tokenizer.h"
#include "text/spm_model.h"
#include "text/tokenizer.h"
#include "text/tokenizer_metadata.h"
#include "text/vocab.h"

namespace folio {

namespace hf {
struct Pipeline;
}

struct Tokenizer::State {
  TokenizerKind kind = TokenizerKind::kBytePairByteLevel;
  PreTokenizerKind pre_tokenizer = PreTokenizerKind::kDefault;
  Vocab vocab;
  std::optional<BpeModel> bpe;             // set for kBytePairByteLevel
  std::optional<SpmModel> spm;             // set for kSentencePieceBpe
  std::shared_ptr<const hf::Pipeline> hf;  // set for kHuggingFace (hf_tokenizer.h)

  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t eot_id = -1;
  int32_t eom_id = -1;
  int32_t unknown_id = -1;
  int32_t padding_id = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;

  // Control, user-defined and unknown tokens, longest text first (ties: lower id first).
  std::vector<int32_t> partition_tokens;
  std::vector<int32_t> end_of_generation_ids;  // sorted
  std::vector<std::string> pieces;             // [n_tokens]; token_to_piece
  size_t max_piece_bytes = 1;                  // the longest piece: a text of B bytes is >= B / this tokens
};

Expected<std::shared_ptr<Tokenizer::State>> load_tokenizer_state(const TokenizerMetadata& metadata);

}  // namespace folio
