#include "engine/spec/verifier.h"

#include <limits>

namespace folio {

int32_t Verifier::verify(Request& request, std::span<const float> logits, int32_t vocab, SamplerScratch& scratch,
                         std::vector<SampleResult>& out) {
  out.clear();
  const Speculation& speculation = request.speculation;
  const std::vector<int32_t>& drafts = speculation.draft_tokens;
  const int32_t k = static_cast<int32_t>(drafts.size());
  // Greedy, and seeded with kSameTokens: each row sampled as without speculation.
  const bool same_tokens = request.params().sampling.is_greedy() ||
                           (seeded_ == SeededVerification::kSameTokens && request.seed().has_value());
  output_.assign(request.tokens.begin() + request.num_prompt_tokens, request.tokens.end());
  for (int32_t i = 0; i <= k; ++i) {
    const std::span<const float> row = logits.subspan(static_cast<size_t>(i) * vocab, static_cast<size_t>(vocab));
    if (same_tokens) {
      out.push_back(request.sampler.sample(row, request.prompt(), output_, scratch));
      if (i == k || out.back().token != drafts[static_cast<size_t>(i)]) return i;
    } else {
      request.sampler.distribution(row, request.prompt(), output_, scratch, target_);
      if (i == k) {
        out.push_back(
            request.sampler.result_for(row, RejectionSampler::draw(target_, request.sampler.uniform()), scratch));
        return k;
      }
      const TokenDistribution* q =
          speculation.draft_probs.empty() ? nullptr : &speculation.draft_probs[static_cast<size_t>(i)];
      const double u_accept = request.sampler.uniform();
      const double u_resample = request.sampler.uniform();
      const AcceptDecision decision =
          rejection_.decide(drafts[static_cast<size_t>(i)], target_, q, u_accept, u_resample);
      out.push_back(request.sampler.result_for(row, decision.token, scratch));
      if (!decision.accepted) return i;
    }
    output_.push_back(drafts[static_cast<size_t>(i)]);
  }
  return k;
}

int32_t Verifier::verify_chosen(const Request& request, std::span<const SampledToken> rows,
                                std::vector<SampleResult>& out) {
  out.clear();
  const std::vector<int32_t>& drafts = request.speculation.draft_tokens;
  const int32_t k = static_cast<int32_t>(drafts.size());
  const bool logprobs = request.params().sampling.logprobs >= 0;
  for (int32_t i = 0; i <= k; ++i) {
    SampleResult sample;
    sample.token = rows[static_cast<size_t>(i)].token;
    sample.logprob = logprobs ? rows[static_cast<size_t>(i)].logprob : std::numeric_limits<float>::quiet_NaN();
    out.push_back(sample);
    if (i == k || sample.token != drafts[static_cast<size_t>(i)]) return i;
  }
  return k;
}

}  // namespace folio
