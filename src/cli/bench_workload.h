// The request sets of `folio bench batch`, generated locally from a fixed seed (no dataset
// download): ShareGPT-like mixed lengths, and many short questions behind one long system
// prompt. Prompts are token slices of a text corpus, or random ids when there is none.
#pragma once

#include <cstdint>
#include <vector>

namespace folio::cli {

struct WorkloadRequest {
  std::vector<int32_t> prompt;
  int32_t max_tokens = 0;  // run with ignore_eos, so this is its output length
};

struct MixedLengthShape {
  int32_t num_requests = 64;
  // Lognormal lengths with these means before clipping. ShareGPT (as vLLM's benchmarks sample
  // it) averages about 200 prompt / 180 output tokens with a long tail; sigma 1.0 and 0.8 give
  // a tail of that kind. scale multiplies the means and upper clips, so that a run fits a
  // small machine while keeping the shape.
  double mean_prompt_tokens = 200.0;
  double mean_output_tokens = 180.0;
  double prompt_sigma = 1.0;
  double output_sigma = 0.8;
  int32_t max_prompt_tokens = 1024;
  int32_t max_output_tokens = 512;
  int32_t min_tokens = 4;
  double scale = 1.0;
  uint64_t seed = 2026;
};

struct SharedPrefixShape {
  int32_t num_questions = 64;
  int32_t prefix_tokens = 1000;
  int32_t min_question_tokens = 20;
  int32_t max_question_tokens = 40;
  int32_t output_tokens = 32;
  uint64_t seed = 2027;
};

// corpus: token ids to slice prompts from; empty means random ids below vocab_size. Slices
// start at distinct offsets, so that no two prompts share a cached block by accident.
std::vector<WorkloadRequest> make_mixed_length_workload(const MixedLengthShape& shape,
                                                        const std::vector<int32_t>& corpus, int32_t vocab_size);
// The system prompt is the corpus's first prefix_tokens; each question a slice from after it.
std::vector<WorkloadRequest> make_shared_prefix_workload(const SharedPrefixShape& shape,
                                                         const std::vector<int32_t>& corpus, int32_t vocab_size);

}  // namespace folio::cli
