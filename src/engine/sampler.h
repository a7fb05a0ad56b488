// Sampler: turns one row of logits into one token for one request.
//
// The order of operations is vLLM's (v0 order for the truncations, see below):
//   1. logprobs (if asked): log-softmax of the raw logits, before anything else touches them
//      (vLLM v1's default logprobs_mode="raw_logprobs"), so they describe the model, not the
//      sampling settings.
//   2. penalties, in vLLM's order: repetition (tokens in prompt or output; logit > 0 is
//      divided, logit <= 0 multiplied), then frequency (-= f * count in output), then
//      presence (-= p if the token occurs in the output).
//   3. greedy: argmax of the penalized logits, ties -> lowest token id. Done.
//   4. temperature: logits / T.
//   5. top-k: keep logits >= the k-th largest (boundary ties kept).
//   6. top-p over the top-k survivors renormalized: walking down from the most likely token,
//      keep a token while the mass strictly above it is < top_p (so the smallest prefix whose
//      mass reaches top_p; the most likely token always stays).
//   7. min-p: keep p >= min_p * p_max. The ratio to the maximum does not change under
//      renormalization, so min-p keeps the same tokens before or after top-k/top-p. (vLLM v1
//      applies min-p before top-k/top-p; the two orders differ only when top_p < 1 and min-p
//      removes tokens that top-p would have counted.)
//   8. draw one token from the survivors in proportion to exp(logit / T).
//
// A Sampler belongs to one sequence and holds only its settings and its RNG (seeded from the
// request's seed, so the same seed, prompt and logits give the same tokens). The vocabulary-sized
// work buffers are a SamplerScratch that the engine owns and lends to every call, so a running
// request costs the same memory whatever the vocabulary, and a decode step allocates nothing
// unless top logprobs are asked for.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "engine/sampling_params.h"
#include "engine/spec/token_distribution.h"

namespace folio {

struct SampleResult {
  int32_t token = -1;
  // Raw logprob of `token`; NaN when params.logprobs == -1.
  float logprob = 0.0f;
  // The params.logprobs most likely tokens by raw logprob, descending (ties: lower id first).
  std::vector<std::pair<int32_t, float>> top_logprobs;
};

// Work buffers of Sampler::sample, sized to the vocabulary on first use and reused: one per
// engine (the engine samples one row at a time), lent to every sequence's Sampler.
struct SamplerScratch {
  struct Candidate {
    float logit;  // after temperature
    int32_t token;
    float weight;  // exp(logit - max logit): the unnormalized probability
  };
  std::vector<float> work;             // (vocab) penalized, then temperature-scaled logits
  std::vector<float> weights;          // (vocab) exp(logit - max logit)
  std::vector<float> select;           // (<= vocab) top-k heap, or a copy for nth_element
  std::vector<double> bucket_mass;     // (4096) top-p: probability mass per logit bucket
  std::vector<Candidate> candidates;   // (<= vocab) tokens still allowed
  std::vector<int32_t> output_counts;  // (vocab) occurrences in output; zero between calls
  std::vector<uint8_t> seen;           // (vocab) seen in prompt or output; zero between calls
  std::vector<int32_t> touched;        // token ids whose output_counts/seen entries are non-zero
};

class Sampler {
 public:
  // params must have passed validate(); that is the API layer's job. seed: the stream's seed
  // (a request's seed plus its sample index), or none to draw one from std::random_device.
  Sampler(const SamplingParams& params, std::optional<uint64_t> seed);
  explicit Sampler(const SamplingParams& params) : Sampler(params, params.seed) {}

  const SamplingParams& params() const { return params_; }

  // logits: (vocab) raw model output for the next position.
  // prompt_tokens, output_tokens: the request's token ids so far; ids outside [0, vocab) are
  // ignored by the penalties.
  SampleResult sample(std::span<const float> logits, std::span<const int32_t> prompt_tokens,
                      std::span<const int32_t> output_tokens, SamplerScratch& scratch);

  // The distribution sample() draws from (steps 2 and 4-7: penalties, temperature, top-k/p,
  // min-p), normalized, as (token, probability) pairs; a point mass for greedy. Speculative
  // decoding verifies drafts against it (engine/spec/rejection_sampler.h). Draws nothing.
  void distribution(std::span<const float> logits, std::span<const int32_t> prompt_tokens,
                    std::span<const int32_t> output_tokens, SamplerScratch& scratch, TokenDistribution& out) const;
  // A token chosen elsewhere (a verified draft) with the logprobs sample() would report for it.
  SampleResult result_for(std::span<const float> logits, int32_t token, SamplerScratch& scratch) const;
  // The next number of this sequence's stream, in [0, 1): speculative acceptance draws from
  // the same stream as sampling, so a seeded request stays reproducible.
  double uniform() { return next_uniform(); }

  // Step 2 on its own, in place. Public so that tests can check it against a hand computation.
  void apply_penalties(std::span<float> logits, std::span<const int32_t> prompt_tokens,
                       std::span<const int32_t> output_tokens, SamplerScratch& scratch) const;

 private:
  int32_t sample_from_distribution(std::span<const float> scaled_logits, SamplerScratch& scratch);
  // Steps 5-7 over scratch.weights (exp(scaled - max_logit)): the survivors in
  // scratch.candidates, and -1; or the one token the distribution reduces to.
  int32_t select_candidates(std::span<const float> scaled_logits, float max_logit, SamplerScratch& scratch) const;
  float kth_largest(std::span<const float> scaled_logits, SamplerScratch& scratch) const;
  void keep_top_p(float max_logit, double total, SamplerScratch& scratch) const;
  void fill_logprobs(std::span<const float> raw_logits, SampleResult& result, SamplerScratch& scratch) const;
  double next_uniform();  // in [0, 1)

  SamplingParams params_;
  std::mt19937_64 rng_;
};

}  // namespace folio
