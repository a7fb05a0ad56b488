// Tokenizer built from llama.cpp's tokenizer.ggml.* metadata (text/tokenizer_metadata.h), matching llama.cpp's
// llama_tokenize token for token (byte-level BPE with the smollm / llama-bpe / qwen2 / gpt-2 /
// default pre-tokenizers, and SentencePiece BPE).
//
// Encoding follows llama.cpp's steps:
//   1. special-token partition: the texts of control, user-defined and unknown tokens are cut
//      out of the input, longest text first; with parse_special = false only user-defined
//      tokens are (HF tokenizers treats non-special added tokens the same way);
//   2. every remaining piece of text is tokenized on its own:
//      BPE: bytes -> code points (each invalid byte becomes U+FFFD) -> pre-tokenizer words ->
//           byte-level BPE per word;
//      SPM: a space is put in front of the piece when it is the first one or follows a special
//           token (add_space_prefix), spaces become U+2581, then SentencePiece BPE;
//   3. BOS / EOS around the whole when add_special and the metadata ask for them.
//
// The object is an immutable, shared state: copying or moving costs one reference count, and
// any number of threads may call the const methods at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace folio {

struct TokenizerMetadata;
struct HfTokenizerFiles;

// A byte range of a text: [offset, offset + length).
struct TextSpan {
  size_t offset = 0;
  size_t length = 0;
};

enum class TokenizerKind {
  kBytePairByteLevel,  // tokenizer.ggml.model = "gpt2"
  kSentencePieceBpe,   // tokenizer.ggml.model = "llama"
  kHuggingFace,        // a tokenizer.json, run as Hugging Face tokenizers runs it (hf_tokenizer.h)
};

class Tokenizer {
 public:
  // model/gguf_tokenizer.h reads a GGUF file's metadata into a TokenizerMetadata.
  static Expected<Tokenizer> from_metadata(const TokenizerMetadata& metadata);
  // A Hugging Face directory's tokenizer.json (with its tokenizer_config.json), encoding and
  // decoding as the `tokenizers` library does.
  static Expected<Tokenizer> from_hf(const HfTokenizerFiles& files);

  // add_special: add BOS / EOS as the metadata says (add_bos_token / add_eos_token, or the
  // model type's default). parse_special: turn control-token texts such as "<|im_start|>"
  // found in text into their ids instead of tokenizing their characters.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;
  // The same, except that no control (or unknown) token is read from a text that overlaps one
  // of literal_spans (sorted, disjoint): there such texts are the characters they are. A chat
  // prompt passes its messages' contents this way, so that a user cannot forge a turn.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special,
                              std::span<const TextSpan> literal_spans) const;
  // Whether the text holds a control or unknown token's text ("<|im_end|>", "</s>", ...).
  bool contains_control_text(std::string_view text) const;

  // The text of the ids as the tokenizer's own library decodes them. skip_special drops
  // control and unknown tokens (BOS, EOS, <|im_end|>, ...); ids outside the vocabulary are
  // dropped. GGUF tokenizers concatenate token_to_piece of every id, as llama.cpp does, and
  // remove no space: SentencePiece pieces keep the space their U+2581 stands for, including the
  // one add_space_prefix put in front of the text; the result may be invalid UTF-8 when the
  // ids split a character (see IncrementalDetokenizer and sanitize_utf8). A tokenizer.json
  // runs its decoder as `tokenizers` does: its result is valid UTF-8, and a Metaspace or Strip
  // decoder removes the space in front of the text's first word.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // The bytes a token stands for: byte tokens <0xAB> give one byte, U+2581 gives a space,
  // byte-level BPE texts are mapped back to bytes, control and user-defined tokens give their
  // text. Unused tokens and ids outside the vocabulary give "".
  const std::string& token_to_piece(int32_t id) const;

  // The token's text exactly as the GGUF file stores it ("Ġthe", "▁the", "<0x0A>").
  const std::string& token_text(int32_t id) const;
  // The id of the token whose stored text is exactly `text`.
  std::optional<int32_t> token_id(std::string_view text) const;

  int32_t vocab_size() const;
  // The most bytes one token stands for: a text of B bytes encodes to at least
  // B / max_token_bytes() tokens, so a prompt far too long for a context is known without
  // tokenizing it.
  size_t max_token_bytes() const;
  TokenizerKind kind() const;
  int32_t bos_id() const;      // -1 if none
  int32_t eos_id() const;      // -1 if none
  int32_t eot_id() const;      // -1 if none
  int32_t unknown_id() const;  // -1 if none
  int32_t padding_id() const;  // -1 if none
  bool add_bos() const;
  bool add_eos() const;
  bool add_space_prefix() const;

  // EOS, EOT, EOM, and the tokens llama.cpp also ends generation on (<|im_end|>, <|eot_id|>,
  // <|endoftext|>, FIM pad / repo / file-separator tokens, ...).
  bool is_end_of_generation(int32_t id) const;
  const std::vector<int32_t>& end_of_generation_ids() const;  // sorted
  // Control or unknown tokens: those that decode(..., skip_special = true) drops.
  bool is_special(int32_t id) const;
  bool is_control(int32_t id) const;
  bool is_user_defined(int32_t id) const;
  bool is_byte(int32_t id) const;

  struct State;

 private:
  explicit Tokenizer(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  std::shared_ptr<const State> state_;
};

// Turns a stream of ids into text that is always valid UTF-8: push returns the characters that
// became complete, holding back the start of a character whose remaining bytes may come with
// later tokens. Invalid bytes become U+FFFD. For ids whose decode is valid UTF-8, the
// concatenation of every push and the final flush equals Tokenizer::decode of all the ids,
// except that a tokenizer.json decoder's removal of the text's leading space does not happen
// here: the ids are taken to continue a text (generated tokens follow a prompt).
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special = false);

  std::string push(int32_t id);
  // Emits whatever is held back (an incomplete character becomes U+FFFD) and resets.
  std::string flush();
  // Bytes held back waiting for the rest of a character.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  Tokenizer tokenizer_;  // shares the tokenizer's state
  bool skip_special_;
  std::string pending_;
};

}  // namespace folio
