// Helpers of the real-model golden tests: a greedy run of one prompt through a SequenceRunner
// (the last prompt position's logits and the generated tokens), the largest difference between
// two logit vectors, and greedy tokens compared until the reference meets a near-tie.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "engine/sequence_runner.h"
#include "model/model_weights.h"
#include "support/cpu_engine.h"

namespace folio::testing {

struct GreedyRun {
  std::vector<float> last_prompt_logits;
  std::vector<int32_t> generated;
  std::vector<double> margins;  // top-1 minus top-2 logit before each generated token
};

// Feeds the prompt, then `steps` argmax tokens one at a time, on any executor whose pool holds
// `context` tokens.
inline GreedyRun run_greedy(Executor& executor, const std::vector<int32_t>& prompt, size_t steps, int32_t context) {
  SequenceRunner runner(executor, context);
  Expected<std::vector<float>> logits = runner.append(prompt);
  EXPECT_TRUE(logits) << logits.error();
  GreedyRun run;
  if (!logits) return run;
  run.last_prompt_logits = *logits;
  for (size_t i = 0; i < steps; ++i) {
    std::vector<float> top = *logits;
    std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<>());
    run.margins.push_back(static_cast<double>(top[0]) - top[1]);
    const int32_t token = static_cast<int32_t>(std::max_element(logits->begin(), logits->end()) - logits->begin());
    run.generated.push_back(token);
    const int32_t next[1] = {token};
    logits = runner.append(next);
    EXPECT_TRUE(logits) << logits.error();
    if (!logits) break;
  }
  return run;
}

// The same on a CPU executor of the model whose pool holds one sequence of `context` tokens.
inline GreedyRun run_greedy(ModelWeights& model, cpu::CpuBackend& backend, const std::vector<int32_t>& prompt,
                            size_t steps, int32_t context) {
  const auto executor = sequence_executor(model, backend, context);
  return run_greedy(*executor, prompt, steps, context);
}

inline double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double max_abs = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  return max_abs;
}

// Our greedy tokens equal the reference's until the end, or until a step where the reference's
// own top-two margin is below near_tie (there a rounding difference may pick either token).
inline void expect_equal_until_near_tie(const std::string& name, const char* what, const std::vector<int32_t>& ours,
                                        const std::vector<int32_t>& theirs, const std::vector<double>& margins,
                                        double near_tie) {
  ASSERT_EQ(ours.size(), theirs.size()) << name;
  size_t agree = 0;
  while (agree < theirs.size() && ours[agree] == theirs[agree]) ++agree;
  std::printf(
      "[%s] %s: %zu/%zu greedy tokens equal%s\n", name.c_str(), what, agree, theirs.size(),
      agree < theirs.size() ? (", then a near-tie (margin " + std::to_string(margins[agree]) + ")").c_str() : "");
  if (agree < theirs.size()) {
    EXPECT_LT(margins[agree], near_tie) << name << " diverges from " << what << " at step " << agree;
  }
}

}  // namespace folio::testing
