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

namespace {

// log-softmax of one row, in double.
std::vector<double> log_softmax(std::span<const float> logits) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max_logit);
  const double log_sum = std::log(sum) + max_logit;
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<double>(logits[i]) - log_sum;
  return out;
}

Status check_chunks(size_t num_tokens, int32_t ctx, int64_t max_chunks, int64_t* num_chunks) {
  if (ctx < 4) return Status::error("perplexity: context must be at least 4 tokens");
  *num_chunks = static_cast<int64_t>(num_tokens) / ctx;
  if (max_chunks > 0) *num_chunks = std::min(*num_chunks, max_chunks);
  if (*num_chunks == 0) {
    return Status::error("perplexity: the text has " + std::to_string(num_tokens) +
                         " tokens, fewer than the context size " + std::to_string(ctx));
  }
  return Status::ok();
}

}  // namespace

double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits) {
  const std::vector<double> p = log_softmax(p_logits), q = log_softmax(q_logits);
  double kl = 0.0;
  for (size_t i = 0; i < p.size(); ++i) kl += std::exp(p[i]) * (p[i] - q[i]);
  return std::max(kl, 0.0);  // rounding can leave a tiny negative for identical rows
}

Expected<PerplexityComparison> compare_perplexity(SequenceRunner& reference, SequenceRunner& test,
                                                  std::span<const int32_t> tokens, int32_t ctx,
                                                  std::optional<int32_t> bos_id, int64_t max_chunks,
                                                  const PerplexityProgress& progress) {
  int64_t num_chunks = 0;
  if (Status s = check_chunks(tokens.size(), ctx, max_chunks, &num_chunks); !s) return s;
  PerplexityComparison result;
  double nll_reference = 0.0, nll_test = 0.0, kl_sum = 0.0;
  int64_t agree = 0;
  for (int64_t chunk = 0; chunk < num_chunks; ++chunk) {
    std::vector<int32_t> window(tokens.begin() + chunk * ctx, tokens.begin() + (chunk + 1) * ctx);
    if (bos_id) window[0] = *bos_id;
    reference.reset();
    test.reset();
    Expected<std::vector<float>> ref_logits = reference.append(window, /*all_logits=*/true);
    if (!ref_logits) return ref_logits.status();
    Expected<std::vector<float>> test_logits = test.append(window, /*all_logits=*/true);
    if (!test_logits) return test_logits.status();
    const size_t vocab = ref_logits->size() / ctx;
    for (int32_t j = ctx / 2; j + 1 < ctx; ++j) {
      const int32_t target = tokens[chunk * ctx + j + 1];
      const std::span<const float> r(ref_logits->data() + j * vocab, vocab), t(test_logits->data() + j * vocab, vocab);
      nll_reference += negative_log_likelihood(r, target);
      nll_test += negative_log_likelihood(t, target);
      const double kl = kl_divergence(r, t);
      kl_sum += kl;
      result.max_kl = std::max(result.max_kl, kl);
      agree += std::max_element(r.begin(), r.end()) - r.begin() == std::max_element(t.begin(), t.end()) - t.begin();
      ++result.reference.scored_tokens;
    }
    result.reference.chunks = result.test.chunks = chunk + 1;
    result.test.scored_tokens = result.reference.scored_tokens;
    const double n = static_cast<double>(result.reference.scored_tokens);
    result.reference.perplexity = std::exp(nll_reference / n);
    result.test.perplexity = std::exp(nll_test / n);
    result.mean_kl = kl_sum / n;
    result.top1_agreement = static_cast<double>(agree) / n;
    if (progress) progress(chunk + 1, num_chunks, result.test.perplexity);
  }
  return result;
}

Expected<PerplexityResult> compute_perplexity(SequenceRunner& runner, std::span<const int32_t> tokens, int32_t ctx,
                                              std::optional<int32_t> bos_id, int64_t max_chunks,
                                              const PerplexityProgress& progress) {
  int64_t num_chunks = 0;
  if (Status s = check_chunks(tokens.size(), ctx, max_chunks, &num_chunks); !s) return s;
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
