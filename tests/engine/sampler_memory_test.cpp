// Memory per running request must not grow with the vocabulary: a Sampler holds its settings and
// its random stream only, and the vocabulary-sized work buffers are the engine's SamplerScratch,
// lent to each call. Measured with glibc's allocator statistics at two vocabularies, Llama-2's
// 32k and Gemma's 256k.
#include <malloc.h>

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "engine/sampler.h"

namespace folio {
namespace {

// In-use heap bytes plus mmap'ed blocks: glibc serves a vocabulary-sized vector (from 128 KB
// on) with mmap, which uordblks alone does not count.
double heap_bytes() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<double>(m.uordblks) + static_cast<double>(m.hblkhd);
}

// Heap growth per Sampler that has sampled once from a row of `vocab` logits.
double bytes_per_sampler(size_t vocab) {
  constexpr int kSamplers = 64;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(vocab);
  for (float& l : logits) l = normal(rng);
  const std::vector<int32_t> prompt = {1, 2, 3, 500, 30000};
  const std::vector<int32_t> output = {9, 9, 31000};
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
  const double before = heap_bytes();
  for (int i = 0; i < kSamplers; ++i) {
    samplers.push_back(std::make_unique<Sampler>(params, static_cast<uint64_t>(i)));
    const SampleResult r = samplers.back()->sample(logits, prompt, output, scratch);
    EXPECT_GE(r.token, 0);
  }
  const double per_sampler = (heap_bytes() - before) / kSamplers;
  std::printf("memory per sampler at a %zu-token vocabulary: %.0f bytes (sizeof %zu); scratch %zu bytes, shared\n",
              vocab, per_sampler, sizeof(Sampler),
              scratch.work.capacity() * 4 + scratch.weights.capacity() * 4 + scratch.select.capacity() * 4 +
                  scratch.candidates.capacity() * sizeof(SamplerScratch::Candidate) +
                  scratch.output_counts.capacity() * 4 + scratch.seen.capacity());
  return per_sampler;
}

TEST(SamplerMemory, MemoryPerSamplerDoesNotDependOnTheVocabulary) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's allocator does not report through mallinfo2";
#endif
  const double small = bytes_per_sampler(32000);
  const double large = bytes_per_sampler(256000);
  // The RNG state is 2.5 KB; a vocabulary-sized buffer per sampler would be >= 32 KB at the
  // small vocabulary and would differ between the two by >= 224 KB (a byte per token).
  EXPECT_LT(small, 8192.0);
  EXPECT_LT(large, 8192.0);
  EXPECT_LT(std::fabs(large - small), 1024.0);
}

}  // namespace
}  // namespace folio
