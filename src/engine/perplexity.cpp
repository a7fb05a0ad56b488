#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace folio {

double negative_log_likelihood(std::span<const float> logits, int32_t target) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max_logit);
  return std::log(sum) - (static_cast<double>(logits[target]) - max_logit);
}

Expected<PerplexityResult> compute_perplexity(SequenceRunner& runner, std::span<const int32_t> tokens, int32_t ctx,
                                              std::optional<int32_t> bos_id, int64_t max_chunks,
                                              const PerplexityProgress& progress) {
  if (ctx < 4) return Status::error("perplexity: context must be at least 4 tokens");
  int64_t num_chunks = static_cast<int64_t>(tokens.size()) / ctx;
  if (max_chunks > 0) num_chunks = std::min(num_chunks, max_chunks);
  if (num_chunks == 0) {
    return Status::error("perplexity: the text has " + std::to_string(tokens.size()) +
                         " tokens, fewer than the context size " + std::to_string(ctx));
  }
  PerplexityResult result;
  double total_nll = 0.0;
  for (int64_t chunk = 0; chunk < num_chunks; ++chunk) {
    std::vector<int32_t> window(tokens.begin() + chunk * ctx, tokens.begin() + (chunk + 1) * ctx);
    if (bos_id) window[0] = *bos_id;
    runner.reset();
    Expected<std::vector<float>> logits = runner.append(window, /*all_logits=*/true);
    if (!logits) return logits.status();
    const size_t vocab = logits->size() / ctx;
    for (int32_t j = ctx / 2; j + 1 < ctx; ++j) {
      // Targets are the original tokens: the BOS swap changes only the input.
      const int32_t target = tokens[chunk * ctx + j + 1];
      total_nll += negative_log_likelihood(std::span<const float>(logits->data() + j * vocab, vocab), target);
      ++result.scored_tokens;
    }
    result.chunks = chunk + 1;
    result.perplexity = std::exp(total_nll / result.scored_tokens);
    if (progress) progress(chunk + 1, num_chunks, result.perplexity);
  }
  return result;
}

}  // namespace folio
