// What the engine checks of folio_cuda_e2e share: a greedy request that runs to its token
// count, whether an engine has given back every KV block and sequence, and a batch run through
// a small pool compared with unconstrained runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace folio::e2e {

inline RequestParams greedy(int32_t max_tokens) {
  RequestParams params;
  params.sampling.temperature = 0.0f;
  params.max_tokens = max_tokens;
  params.ignore_eos = true;
  return params;
}

inline bool pool_empty(const Engine& engine) {
  const EngineMetrics m = engine.metrics();
  return m.kv.num_used_blocks == 0 && m.kv.num_sequences == 0 && m.num_running + m.num_waiting + m.num_swapped == 0;
}

// The prompts through an engine on `executor` (preempting as its pool requires): how many
// outputs equal `reference`'s, the engine's metrics, and whether the pool was empty after.
struct PreemptionRun {
  int same = 0;
  EngineMetrics metrics;
  bool pool_empty = false;
  // "N preemptions, N blocks swapped out, N blocks handed out over staging blocks"
  std::string counts() const {
    return std::to_string(metrics.num_preemptions) + " preemptions, " +
           std::to_string(metrics.kv.num_swapped_out_blocks) + " blocks swapped out, " +
           std::to_string(metrics.kv.num_overlay_allocations) + " blocks handed out over staging blocks";
  }
};
inline PreemptionRun run_preempting(Executor& executor, const Tokenizer& tokenizer, PreemptionMode mode,
                                    const std::vector<std::vector<int32_t>>& prompts, const RequestParams& params,
                                    const std::vector<std::vector<int32_t>>& reference) {
  EngineConfig config;
  config.scheduler.preemption_mode = mode;
  Engine engine(executor, tokenizer, config);
  const std::vector<Generation> results = engine.generate(prompts, params);
  PreemptionRun run;
  for (size_t i = 0; i < prompts.size(); ++i) run.same += results[i].tokens == reference[i];
  run.metrics = engine.metrics();
  run.pool_empty = pool_empty(engine);
  return run;
}

}  // namespace folio::e2e
