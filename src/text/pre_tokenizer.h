// Pre-tokenizers of byte-level BPE models: they cut text into words before BPE runs on each
// word, and BPE never merges across words. Each kind reproduces one of llama.cpp's
// tokenizer.ggml.pre behaviours exactly, including where llama.cpp's hand-written matchers
// differ from the regex they stand for, because ids must match llama.cpp's.
//
//   kGpt2    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   kSmolLM  every \p{N} alone first, then kGpt2 inside each piece (also StarCoder, Refact, ...)
//   kLlama3  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//            ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   kQwen2   as kLlama3 with \p{N} instead of \p{N}{1,3}
//   kDefault runs of punctuation (and $+<=>^~|) alone, then kGpt2, then runs of \p{N} alone,
//            then [0-9]{3} alone (llama.cpp's fallback when tokenizer.ggml.pre is "default")
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace folio {

enum class PreTokenizerKind { kGpt2, kSmolLM, kLlama3, kQwen2, kDefault };

// Maps a tokenizer.ggml.pre value to its kind; nullopt for names this build does not know.
std::optional<PreTokenizerKind> pre_tokenizer_from_name(std::string_view name);

// Splits code points into words. Returns each word's length in code points, in order; the
// lengths add up to cps.size() and none is zero.
std::vector<uint32_t> split_words(PreTokenizerKind kind, std::span<const char32_t> cps);

}  // namespace folio
