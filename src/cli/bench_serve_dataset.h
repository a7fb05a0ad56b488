// The requests `folio bench serve` sends: prompt texts of chosen token lengths, each with its
// max_tokens. Lengths are fixed (--input-len / --output-len) or ShareGPT-like (the seeded
// lognormal lengths of bench_workload.h, which `folio bench batch` uses). Texts are random
// tokens decoded, re-encoded and trimmed until the local tokenizer counts exactly the wanted
// length, so that a server with the same tokenizer sees that many prompt tokens.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace folio::cli {

struct ServeBenchRequest {
  std::string prompt;
  int32_t prompt_tokens = 0;  // the local tokenizer's count, BOS / EOS included when the model adds them
  int32_t max_tokens = 0;
};

enum class ServeDataset { kShareGptLike, kFixed };

struct ServeDatasetOptions {
  ServeDataset kind = ServeDataset::kShareGptLike;
  int32_t num_prompts = 100;
  int32_t input_len = 128;   // kFixed
  int32_t output_len = 128;  // kFixed
  double scale = 1.0;        // kShareGptLike: multiplies mean and upper clip of both lengths
  uint64_t seed = 0;
};

std::vector<ServeBenchRequest> make_serve_requests(const ServeDatasetOptions& options, const Tokenizer& tokenizer);

// Draws texts of exact token lengths from one tokenizer; holds the list of tokens it draws
// from (no special, byte or user-defined tokens, nor pieces that are not whole UTF-8).
class RandomPromptTexts {
 public:
  RandomPromptTexts(const Tokenizer& tokenizer, uint64_t seed);
  // A text whose encoding with add_special has num_tokens tokens when that can be reached
  // (almost always); otherwise the closest text found.
  std::string make(int32_t num_tokens);

 private:
  const Tokenizer& tokenizer_;
  std::vector<int32_t> candidates_;
  std::mt19937_64 rng_;
};

}  // namespace folio::cli
