// Memory per running request must not grow with the vocabulary: a Sampler holds its settings and
// its random stream only, and the vocabulary-sized work buffers are the engine's SamplerScratch,
// lent to each call. Measured with glibc's allocator statistics, at Llama-3's 128k vocabulary.
#include <malloc.h>

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "engine/sampler.h"

namespace folio {
namespace {

TEST(SamplerMemory, SamplersAtA128kVocabularyOwnNoVocabularySizedBuffers) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's allocator does not report through mallinfo2";
#endif
  constexpr size_t kVocab = 128256;
  constexpr int kSamplers = 64;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(kVocab);
  for (float& l : logits) l = normal(rng);
  const std::vector<int32_t> prompt = {1, 2, 3, 500, 70000};
  const std::vector<int32_t> output = {9, 9, 128000};
  // Every path that touches the buffers: penalties, temperature, top-k, top-p, min-p, logprobs.
  SamplingParams params;
  params.temperature = 0.8f;
  params.top_k = 200;
  params.top_p = 0.9f;
  params.min_p = 0.01f;
  params.repetition_penalty = 1.1f;
  params.frequency_penalty = 0.2f;
  params.logprobs = 0;
  SamplerScratch scratch;
  Sampler(params, 1).sample(logits, prompt, output, scratch);  // the scratch grows once, here

  std::vector<std::unique_ptr<Sampler>> samplers;
  samplers.reserve(kSamplers);
  const size_t before = mallinfo2().uordblks;
  for (int i = 0; i < kSamplers; ++i) {
    samplers.push_back(std::make_unique<Sampler>(params, static_cast<uint64_t>(i)));
    const SampleResult r = samplers.back()->sample(logits, prompt, output, scratch);
    ASSERT_GE(r.token, 0);
  }
  const size_t after = mallinfo2().uordblks;
  const double per_sampler = static_cast<double>(after - before) / kSamplers;
  std::printf("memory per sampler at a %zu-token vocabulary: %.0f bytes (sizeof %zu); scratch %zu bytes, shared\n",
              kVocab, per_sampler, sizeof(Sampler),
              scratch.work.capacity() * 4 + scratch.weights.capacity() * 4 + scratch.select.capacity() * 4 +
                  scratch.candidates.capacity() * sizeof(SamplerScratch::Candidate) +
                  scratch.output_counts.capacity() * 4 + scratch.seen.capacity());
  // A vocabulary-sized buffer per sampler would be >= 128k bytes; the RNG state is 2.5 KB.
  EXPECT_LT(per_sampler, 8192.0);
}

}  // namespace
}  // namespace folio
