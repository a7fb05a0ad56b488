// Perplexity of a model over a token sequence.
//
// The tokens are cut into non-overlapping chunks of ctx tokens. Each chunk is evaluated from an
// empty cache, its first token replaced by BOS when the model uses one, and only the second half
// of each chunk is scored, so every scored token sees at least ctx/2 tokens of context (the
// scheme llama.cpp's perplexity tool uses, so figures compare).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>

#include "core/status.h"
#include "engine/sequence_runner.h"

namespace folio {

struct PerplexityResult {
  double perplexity = 0.0;
  int64_t scored_tokens = 0;
  int64_t chunks = 0;
};

// Called after each chunk with (chunks done, chunks total, perplexity so far).
using PerplexityProgress = std::function<void(int64_t, int64_t, double)>;

Expected<PerplexityResult> compute_perplexity(SequenceRunner& runner, std::span<const int32_t> tokens, int32_t ctx,
                                              std::optional<int32_t> bos_id, int64_t max_chunks = 0,
                                              const PerplexityProgress& progress = {});

// The same text through two runners (say an fp16 KV cache and a quantized one, or two weight
// formats), scored on the same positions: both perplexities, the mean KL divergence
// KL(reference || test) of the next-token distributions, and how often their top tokens agree.
struct PerplexityComparison {
  PerplexityResult reference;
  PerplexityResult test;
  double mean_kl = 0.0;  // nats per scored token
  double max_kl = 0.0;
  double top1_agreement = 0.0;  // fraction of scored positions whose argmax is the same
};

Expected<PerplexityComparison> compare_perplexity(SequenceRunner& reference, SequenceRunner& test,
                                                  std::span<const int32_t> tokens, int32_t ctx,
                                                  std::optional<int32_t> bos_id, int64_t max_chunks = 0,
                                                  const PerplexityProgress& progress = {});

// KL(softmax(p) || softmax(q)) in double.
double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits);

// -log softmax(logits)[target], computed in double.
double negative_log_likelihood(std::span<const float> logits, int32_t target);

}  // namespace folio
