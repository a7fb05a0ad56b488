// How an executor that samples on its device turns each logit row into a token: the rows'
// settings and the penalty entries, plain numbers with the Sampler's semantics
// (engine/sampler.h), no request or device types. The CUDA sampling kernel reads RowSampling as
// it is (it is trivially copyable), so this struct is the one definition of a row's settings.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

namespace folio {

struct RowSampling {
  float temperature = 1.0f;  // < 1e-5 (SamplingParams::kGreedyTemperature): greedy
  int32_t top_k = -1;        // <= 0 or >= vocab: off
  float top_p = 1.0f;        // >= 1: off
  float min_p = 0.0f;        // <= 0: off
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  // The random stream: seed = the request's (or one drawn once for an unseeded request),
  // offset = the request's step (its number of output tokens so far), so that a request's draws
  // depend on neither its row nor the rest of the batch.
  uint64_t seed = 0;
  uint64_t offset = 0;
  // This row's penalty entries are [penalty_begin, penalty_end) of SamplingPlan's lists.
  int32_t penalty_begin = 0;
  int32_t penalty_end = 0;

  bool is_greedy() const { return temperature < 1e-5f; }
  bool has_penalties() const { return penalty_end > penalty_begin; }
};
static_assert(std::is_trivially_copyable_v<RowSampling>);

// One RowSampling per logit row of the batch, in row order, and the penalty entries of all rows.
// An entry is a token at most once per row: count > 0 is its number of occurrences in the output
// (repetition, frequency and presence penalties apply); count == 0 means it was seen only in
// the prompt (repetition penalty only).
struct SamplingPlan {
  std::vector<RowSampling> rows;
  std::vector<int32_t> penalty_tokens;
  std::vector<int32_t> penalty_counts;

  void clear() {
    rows.clear();
    penalty_tokens.clear();
    penalty_counts.clear();
  }
};

}  // namespace folio
