// Builds Tokenizer::State from tokenizer.ggml.* metadata (TokenizerMetadata). Defaults and fix-ups follow
// llama.cpp's vocabulary loader, because they change which ids come out:
//   - "llama" (SentencePiece): BOS 1, EOS 2, <unk> 0, add BOS, add a space prefix;
//   - "gpt2" (byte-level BPE): BOS = EOS = 11 when the file names none; no BOS unless the
//     pre-tokenizer is Llama-3's, which also emits a word that is itself a token whole;
//   - tokens whose text marks them as end-of-turn / FIM tokens are treated as control tokens
//     (and so are recognised as special text) even when the file calls them normal;
//   - end of generation: EOS, EOT, EOM, FIM pad/repo/separator, and a list of known texts.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>

#include "text/byte_level.h"
#include "text/tokenizer_metadata.h"
#include "text/tokenizer_state.h"

namespace folio {
namespace {

Status load_vocab(const TokenizerMetadata& m, Vocab& vocab) {
  if (m.tokens.empty()) return Status::error("GGUF file has no tokenizer.ggml.tokens string array");
  const size_t n = m.tokens.size();
  if (n > static_cast<size_t>(INT32_MAX)) return Status::error("tokenizer.ggml.tokens is too long");

  std::vector<float> scores(n, 0.0f);
  if (m.scores) {
    if (m.scores->size() < n) {
      return Status::error("tokenizer.ggml.scores must be a number array with one entry per token");
    }
    std::copy_n(m.scores->begin(), n, scores.begin());
  }

  std::vector<uint8_t> attrs(n, kAttrNormal);
  if (m.token_types) {
    if (m.token_types->size() < n) {
      return Status::error("tokenizer.ggml.token_type must be an integer array with one entry per token");
    }
    for (size_t i = 0; i < n; ++i) attrs[i] = token_attr_from_type((*m.token_types)[i]);
  }

  vocab.texts = m.tokens;
  vocab.scores = std::move(scores);
  vocab.attrs = std::move(attrs);
  vocab.text_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    std::string& text = vocab.texts[i];
    if (text.empty()) text = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp names them
    vocab.text_to_id[text] = static_cast<int32_t>(i);              // a repeated text maps to its last id
  }
  return Status::ok();
}

// Replaces `id` with the file's value for `name` when that is a valid id.
void read_token_id(const TokenizerMetadata& m, std::string_view name, const Vocab& vocab, int32_t& id) {
  const auto it = m.ids.find(name);
  if (it != m.ids.end() && it->second >= 0 && it->second < vocab.size()) id = static_cast<int32_t>(it->second);
}

bool flag(const TokenizerMetadata& m, std::string_view name, bool fallback) {
  const auto it = m.flags.find(name);
  return it != m.flags.end() ? it->second : fallback;
}

// Ids (ascending) of the tokens whose text is in `texts`.
std::vector<int32_t> ids_with_texts(const Vocab& vocab, std::span<const std::string_view> texts) {
  std::vector<int32_t> ids;
  for (const std::string_view text : texts) {
    if (const int32_t id = vocab.find(text); id >= 0) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

// When the file names no token for a role, takes the token with the first known text for it
// (llama.cpp takes whichever its hash map yields first) and makes it a control token.
void detect_role(Vocab& vocab, std::span<const std::string_view> texts, int32_t& id) {
  if (id >= 0) return;
  for (const std::string_view text : texts) {
    if (const int32_t found = vocab.find(text); found >= 0) {
      id = found;
      vocab.attrs[id] |= kAttrControl;
      return;
    }
  }
}

struct FimIds {
  int32_t prefix = -1, suffix = -1, middle = -1, pad = -1, repo = -1, separator = -1;
};

void detect_special_roles(const TokenizerMetadata& file, Tokenizer::State& s) {
  // clang-format off
  static constexpr std::array<std::string_view, 11> kEot = {
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
      "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"};
  static constexpr std::array<std::string_view, 1> kEom = {"<|eom_id|>"};
  static constexpr std::array<std::string_view, 8> kFimPrefix = {
      "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
      "<|code_prefix|>", "<|prefix|>"};
  static constexpr std::array<std::string_view, 8> kFimSuffix = {
      "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
      "<|code_suffix|>", "<|suffix|>"};
  static constexpr std::array<std::string_view, 8> kFimMiddle = {
      "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
      "<|code_middle|>", "<|middle|>"};
  static constexpr std::array<std::string_view, 5> kFimPad = {
      "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
  static constexpr std::array<std::string_view, 5> kFimRepo = {
      "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
  static constexpr std::array<std::string_view, 1> kFimSeparator = {"<|file_sep|>"};
  // Texts that end generation wherever they appear in a vocabulary.
  static constexpr std::array<std::string_view, 22> kEndOfGeneration = {
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
      "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
      "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
      "<｜end▁of▁sentence｜>", "[e~["};
  // clang-format on

  FimIds fim;
  read_token_id(file, "fim_pre_token_id", s.vocab, fim.prefix);
  read_token_id(file, "fim_suf_token_id", s.vocab, fim.suffix);
  read_token_id(file, "fim_mid_token_id", s.vocab, fim.middle);
  read_token_id(file, "fim_pad_token_id", s.vocab, fim.pad);
  read_token_id(file, "fim_rep_token_id", s.vocab, fim.repo);
  read_token_id(file, "fim_sep_token_id", s.vocab, fim.separator);
  read_token_id(file, "prefix_token_id", s.vocab, fim.prefix);  // older names
  read_token_id(file, "suffix_token_id", s.vocab, fim.suffix);
  read_token_id(file, "middle_token_id", s.vocab, fim.middle);

  detect_role(s.vocab, kEot, s.eot_id);
  detect_role(s.vocab, kEom, s.eom_id);
  detect_role(s.vocab, kFimPrefix, fim.prefix);
  detect_role(s.vocab, kFimSuffix, fim.suffix);
  detect_role(s.vocab, kFimMiddle, fim.middle);
  detect_role(s.vocab, kFimPad, fim.pad);
  detect_role(s.vocab, kFimRepo, fim.repo);
  detect_role(s.vocab, kFimSeparator, fim.separator);

  std::vector<int32_t> eog = ids_with_texts(s.vocab, kEndOfGeneration);
  for (const int32_t id : eog) s.vocab.attrs[id] |= kAttrControl;
  for (const int32_t id : {fim.pad, fim.repo, fim.separator, s.eos_id, s.eot_id, s.eom_id}) {
    if (id >= 0) eog.push_back(id);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());

  // Two exceptions llama.cpp makes: in gpt-oss / solar-open vocabularies <|end|> ends a message
  // but not the generation, and next to Gemma-4 / PLaMo markers </s> is an ordinary token.
  const auto eog_with_text = [&](std::string_view text) -> int32_t {
    for (const int32_t id : eog) {
      if (s.vocab.texts[id] == text) return id;
    }
    return -1;
  };
  const auto drop = [&](int32_t id, uint8_t attrs) {
    eog.erase(std::find(eog.begin(), eog.end(), id));
    s.vocab.attrs[id] = attrs;
  };
  const bool has_call = eog_with_text("<|call|>") >= 0 || eog_with_text("<|calls|>") >= 0;
  if (const int32_t end = eog_with_text("<|end|>");
      end >= 0 && has_call && (eog_with_text("<|return|>") >= 0 || eog_with_text("<|flush|>") >= 0)) {
    drop(end, kAttrUserDefined);
  }
  if (const int32_t eos = eog_with_text("</s>");
      eos >= 0 && (eog_with_text("<|tool_response>") >= 0 || eog_with_text("<|plamo:eos|>") >= 0)) {
    drop(eos, kAttrNormal);
  }
  s.end_of_generation_ids = std::move(eog);
}

// The bytes each token stands for (Tokenizer::token_to_piece).
std::string piece_of(const Tokenizer::State& s, int32_t id) {
  const std::string& text = s.vocab.texts[id];
  const uint8_t attrs = s.vocab.attrs[id];
  if (attrs & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return text;
  if (attrs & kAttrNormal) {
    if (s.kind == TokenizerKind::kBytePairByteLevel) return byte_level_to_bytes(text);
    std::string piece;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text.compare(i, 3, "\xE2\x96\x81") == 0) {
        piece.push_back(' ');
        i += 2;
      } else {
        piece.push_back(text[i]);
      }
    }
    return piece;
  }
  if ((attrs & kAttrByte) && text.size() == 6 && text.starts_with("<0x") && text.back() == '>') {
    return std::string(1, static_cast<char>(std::strtol(text.substr(3, 2).c_str(), nullptr, 16)));
  }
  return {};  // unused and undefined tokens print nothing
}

}  // namespace

Expected<std::shared_ptr<Tokenizer::State>> load_tokenizer_state(const TokenizerMetadata& file) {
  auto state = std::make_shared<Tokenizer::State>();
  Tokenizer::State& s = *state;

  const std::optional<std::string> model = file.model;
  if (Status status = load_vocab(file, s.vocab); !status) return status;
  const Vocab& vocab = s.vocab;

  if (*model == "llama") {
    s.kind = TokenizerKind::kSentencePieceBpe;
    s.bos_id = 1;
    s.eos_id = 2;
    s.unknown_id = 0;
    s.add_bos = true;
    s.add_space_prefix = true;
  } else if (*model == "gpt2") {
    s.kind = TokenizerKind::kBytePairByteLevel;
    s.bos_id = 11;
    s.eos_id = 11;
    const std::string pre_name = file.pre.value_or("");
    const std::optional<PreTokenizerKind> pre = pre_tokenizer_from_name(pre_name);
    if (!pre) {
      return Status::error("unsupported tokenizer.ggml.pre '" + pre_name +
                           "' (supported: smollm, llama-bpe, qwen2, gpt-2, default and aliases)");
    }
    s.pre_tokenizer = *pre;
    s.add_bos = *pre == PreTokenizerKind::kLlama3;
  } else {
    return Status::error("unsupported tokenizer.ggml.model '" + *model +
                         "' (folio reads 'gpt2' byte-level BPE and 'llama' SentencePiece)");
  }
  for (int32_t* id : {&s.bos_id, &s.eos_id, &s.unknown_id}) {
    if (!vocab.contains(*id)) *id = -1;
  }
  read_token_id(file, "bos_token_id", vocab, s.bos_id);
  read_token_id(file, "eos_token_id", vocab, s.eos_id);
  read_token_id(file, "eot_token_id", vocab, s.eot_id);
  read_token_id(file, "eom_token_id", vocab, s.eom_id);
  read_token_id(file, "unknown_token_id", vocab, s.unknown_id);
  read_token_id(file, "padding_token_id", vocab, s.padding_id);
  s.add_bos = flag(file, "add_bos_token", s.add_bos);
  s.add_eos = flag(file, "add_eos_token", s.add_eos);
  s.add_space_prefix = flag(file, "add_space_prefix", s.add_space_prefix);

  if (s.kind == TokenizerKind::kBytePairByteLevel) {
    if (!file.merges) return Status::error("byte-level BPE tokenizer has no tokenizer.ggml.merges");
    s.bpe.emplace(BpeModel::build(vocab, *file.merges, s.pre_tokenizer == PreTokenizerKind::kLlama3));
  } else {
    s.spm.emplace(vocab, s.unknown_id);
  }

  detect_special_roles(file, s);

  for (int32_t id = 0; id < vocab.size(); ++id) {
    const bool has_text = !vocab.texts[id].empty();
    if (has_text && (vocab.attrs[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown))) {
      s.partition_tokens.push_back(id);
    }
  }
  std::stable_sort(s.partition_tokens.begin(), s.partition_tokens.end(),
                   [&](int32_t a, int32_t b) { return vocab.texts[a].size() > vocab.texts[b].size(); });

  s.pieces.resize(vocab.size());
  for (int32_t id = 0; id < vocab.size(); ++id) {
    s.pieces[id] = piece_of(s, id);
    s.max_piece_bytes = std::max(s.max_piece_bytes, s.pieces[id].size());
  }
  return std::shared_ptr<Tokenizer::State>(std::move(state));
}

}  // namespace folio
