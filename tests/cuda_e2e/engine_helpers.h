// What the engine checks of folio_cuda_e2e share: a greedy request that runs to its token
// count, and whether an engine has given back every KV block and sequence.
#pragma once

#include <cstdint>

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

}  // namespace folio::e2e
