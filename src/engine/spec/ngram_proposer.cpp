#include "engine/spec/ngram_proposer.h"

#include <algorithm>

namespace folio {

std::vector<int32_t> NgramProposer::lookup(std::span<const int32_t> tokens, int32_t max_tokens,
                                           const NgramConfig& config) {
  std::vector<int32_t> proposal;
  const int64_t length = static_cast<int64_t>(tokens.size());
  const int64_t window_start = std::max<int64_t>(0, length - config.max_search_tokens);
  for (int32_t n = std::min<int32_t>(config.max_n, static_cast<int32_t>(length) - 1); n >= config.min_n && n >= 1;
       --n) {
    const std::span<const int32_t> suffix = tokens.subspan(static_cast<size_t>(length - n));
    // The most recent earlier occurrence: it starts before the suffix does, and at least one
    // token follows it.
    for (int64_t start = length - n - 1; start >= window_start; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t to = std::min<int64_t>(length, from + max_tokens);
      proposal.assign(tokens.begin() + from, tokens.begin() + to);
      return proposal;
    }
  }
  return proposal;
}

void NgramProposer::propose(std::span<const ProposalSlot> slots) {
  for (const ProposalSlot& slot : slots) {
    Speculation& speculation = slot.request->speculation;
    speculation.draft_tokens = lookup(slot.request->tokens, slot.max_tokens, config_);
    speculation.draft_probs.clear();
  }
}

}  // namespace folio
