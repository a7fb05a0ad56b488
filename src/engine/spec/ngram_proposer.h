// Prompt lookup (Saxena 2023; vLLM's "ngram" method): the request's last n tokens are looked up
// in its own earlier tokens (prompt and output), and the tokens that followed the most recent
// earlier occurrence are proposed. n runs from max_n down to min_n: the longest match wins.
// Costs no forward pass, proposes nothing where the text does not repeat itself, and shines
// where the output copies from the input (rewriting, summarizing, editing code).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/spec/proposer.h"

namespace folio {

struct NgramConfig {
  int32_t min_n = 1;
  int32_t max_n = 4;
  // Only the last this many tokens are searched, so a step's cost stays bounded at long context.
  int32_t max_search_tokens = 4096;
};

class NgramProposer final : public Proposer {
 public:
  explicit NgramProposer(const NgramConfig& config) : config_(config) {}

  std::string name() const override { return "ngram"; }
  void propose(std::span<const ProposalSlot> slots) override;

  // The proposal for one token list: at most max_tokens tokens, empty when no n-gram matches.
  static std::vector<int32_t> lookup(std::span<const int32_t> tokens, int32_t max_tokens, const NgramConfig& config);

 private:
  NgramConfig config_;
};

}  // namespace folio
