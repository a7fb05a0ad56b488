#include "cli/bench_workload.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <set>

namespace folio::cli {
namespace {

// Slices of the corpus (or random ids) at distinct offsets within [from, corpus end).
class PromptSource {
 public:
  PromptSource(const std::vector<int32_t>& corpus, int32_t vocab_size, std::mt19937_64& rng, size_t from = 0)
      : corpus_(corpus), vocab_size_(vocab_size), rng_(rng), from_(from) {}

  std::vector<int32_t> take(int32_t length) {
    const size_t n = static_cast<size_t>(length);
    if (corpus_.size() < from_ + n + 1) return random_ids(n);
    std::uniform_int_distribution<size_t> offset(from_, corpus_.size() - n);
    for (int attempt = 0; attempt < 100; ++attempt) {
      const size_t at = offset(rng_);
      if (!used_offsets_.insert(at).second) continue;
      return std::vector<int32_t>(corpus_.begin() + static_cast<std::ptrdiff_t>(at),
                                  corpus_.begin() + static_cast<std::ptrdiff_t>(at + n));
    }
    return random_ids(n);
  }

 private:
  std::vector<int32_t> random_ids(size_t n) {
    std::uniform_int_distribution<int32_t> id(0, vocab_size_ - 1);
    std::vector<int32_t> ids(n);
    for (int32_t& t : ids) t = id(rng_);
    return ids;
  }

  const std::vector<int32_t>& corpus_;
  int32_t vocab_size_;
  std::mt19937_64& rng_;
  size_t from_;
  std::set<size_t> used_offsets_;
};

// A lognormal draw with the given mean (mu = ln(mean) - sigma^2 / 2), clipped.
int32_t draw_length(std::mt19937_64& rng, double mean, double sigma, int32_t lo, int32_t hi) {
  std::lognormal_distribution<double> dist(std::log(mean) - 0.5 * sigma * sigma, sigma);
  const double x = std::round(dist(rng));
  return static_cast<int32_t>(std::clamp(x, static_cast<double>(lo), static_cast<double>(std::max(lo, hi))));
}

}  // namespace

std::vector<WorkloadRequest> make_mixed_length_workload(const MixedLengthShape& shape,
                                                        const std::vector<int32_t>& corpus, int32_t vocab_size) {
  std::mt19937_64 rng(shape.seed);
  PromptSource source(corpus, vocab_size, rng);
  const auto scaled = [&](int32_t n) { return static_cast<int32_t>(std::lround(n * shape.scale)); };
  std::vector<WorkloadRequest> requests(static_cast<size_t>(shape.num_requests));
  for (WorkloadRequest& r : requests) {
    // Both lengths drawn before the slice, so that the lengths do not depend on the corpus.
    const int32_t prompt_len = draw_length(rng, shape.mean_prompt_tokens * shape.scale, shape.prompt_sigma,
                                           shape.min_tokens, scaled(shape.max_prompt_tokens));
    r.max_tokens = draw_length(rng, shape.mean_output_tokens * shape.scale, shape.output_sigma, shape.min_tokens,
                               scaled(shape.max_output_tokens));
    r.prompt = source.take(prompt_len);
  }
  return requests;
}

std::vector<WorkloadRequest> make_shared_prefix_workload(const SharedPrefixShape& shape,
                                                         const std::vector<int32_t>& corpus, int32_t vocab_size) {
  std::mt19937_64 rng(shape.seed);
  std::vector<int32_t> system_prompt;
  if (corpus.size() > static_cast<size_t>(shape.prefix_tokens)) {
    system_prompt.assign(corpus.begin(), corpus.begin() + shape.prefix_tokens);
  } else {
    const std::vector<int32_t> no_corpus;
    system_prompt = PromptSource(no_corpus, vocab_size, rng).take(shape.prefix_tokens);
  }
  PromptSource questions(corpus, vocab_size, rng, static_cast<size_t>(shape.prefix_tokens));
  std::uniform_int_distribution<int32_t> question_len(shape.min_question_tokens, shape.max_question_tokens);
  std::vector<WorkloadRequest> requests(static_cast<size_t>(shape.num_questions));
  for (WorkloadRequest& r : requests) {
    r.prompt = system_prompt;
    const std::vector<int32_t> question = questions.take(question_len(rng));
    r.prompt.insert(r.prompt.end(), question.begin(), question.end());
    r.max_tokens = shape.output_tokens;
  }
  return requests;
}

}  // namespace folio::cli
