// Verification of one request's proposals from the target's rows: row j holds the target's
// logits after the request's tokens and the first j proposals, so proposal j is checked against
// row j, and when all k pass, row k gives one more token for free.
//
// Greedy requests keep a proposal while it is the target's (penalized) argmax, and emit the
// argmax where it is not: exactly the tokens decoding without speculation gives.
//
// Sampled requests have two exact methods, both with penalties counting the proposals before a
// row as output (as the rows without speculation would have), both drawing from the request's
// own stream:
//   - rejection sampling (rejection_sampler.h) on the target's processed distribution: the most
//     proposals accepted (sum min(p, q) per position), the default for unseeded requests;
//   - sample, then compare: the row is sampled as decoding without speculation samples it, and
//     the proposal kept while it equals the sample. The request's stream is consumed exactly as
//     without speculation, so a seeded request gives the same tokens with speculation on or off,
//     at any load and any k (reproducibility a user can rely on); a proposal is accepted with
//     probability p(x) instead of min(1, p(x) / q(x)), the same for point-mass proposals
//     (n-gram), a little lower for a draft model's. The default for seeded requests.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/spec/rejection_sampler.h"
#include "executor/executor.h"

namespace folio {

enum class SeededVerification { kSameTokens, kRejectionSampling };

class Verifier {
 public:
  explicit Verifier(SeededVerification seeded = SeededVerification::kSameTokens) : seeded_(seeded) {}

  // logits: (k + 1, vocab), the chunk's rows from its last real token on. The emitted tokens
  // (1 to k + 1, with the target's logprobs when asked for) go to out; returns how many
  // proposals were accepted.
  int32_t verify(Request& request, std::span<const float> logits, int32_t vocab, SamplerScratch& scratch,
                 std::vector<SampleResult>& out);
  // The same for a greedy request whose rows the executor already reduced to its argmax
  // (SampledToken per row, as the sampling plan asked).
  static int32_t verify_chosen(const Request& request, std::span<const SampledToken> rows,
                               std::vector<SampleResult>& out);

 private:
  SeededVerification seeded_;
  RejectionSampler rejection_;
  TokenDistribution target_;
  std::vector<int32_t> output_;
};

}  // namespace folio
