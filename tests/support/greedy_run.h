// Helpers of the real-model golden tests: a greedy run of one prompt through a SequenceRunner
// (the last prompt position's logits and the generated tokens), and the largest difference
// between two logit vectors.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "engine/sequence_runner.h"
#include "model/model_weights.h"
#include "support/cpu_engine.h"

namespace folio::testing {

struct GreedyRun {
  std::vector<float> last_prompt_logits;
  std::vector<int32_t> generated;
};

// Feeds the prompt, then `steps` argmax tokens one at a time, in a pool of `context` tokens.
inline GreedyRun run_greedy(ModelWeights& model, cpu::CpuBackend& backend, const std::vector<int32_t>& prompt,
                            size_t steps, int32_t context) {
  const auto executor = sequence_executor(model, backend, context);
  SequenceRunner runner(*executor, context);
  Expected<std::vector<float>> logits = runner.append(prompt);
  EXPECT_TRUE(logits) << logits.error();
  GreedyRun run;
  if (!logits) return run;
  run.last_prompt_logits = *logits;
  for (size_t i = 0; i < steps; ++i) {
    const int32_t token = static_cast<int32_t>(std::max_element(logits->begin(), logits->end()) - logits->begin());
    run.generated.push_back(token);
    const int32_t next[1] = {token};
    logits = runner.append(next);
    EXPECT_TRUE(logits) << logits.error();
    if (!logits) break;
  }
  return run;
}

inline double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double max_abs = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  return max_abs;
}

}  // namespace folio::testing
