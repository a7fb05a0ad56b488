// Serves a benchmark workload through an Engine and measures it: all requests submitted at
// once (continuous batching), or one at a time, each submitted when the previous one ends
// (a single-stream model behind a web server). Greedy, ignore_eos: every request produces
// exactly max_tokens tokens, so both modes do the same work.
#pragma once

#include <cstdint>
#include <vector>

#include "cli/bench_workload.h"
#include "cli/kv_utilization_sampler.h"
#include "core/status.h"
#include "engine/engine.h"

namespace folio::cli {

enum class ServingMode { kContinuousBatching, kOneAtATime };
const char* serving_mode_name(ServingMode mode);

struct WorkloadResult {
  double seconds = 0.0;
  int64_t num_steps = 0;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  int64_t prompt_tokens_computed = 0;  // prefill work done; less than prompt_tokens on cache hits
  std::vector<double> ttft_s;          // from each request's submission
  std::vector<double> tpot_s;          // requests with at least two output tokens
  int64_t preemptions = 0;
  double prefix_cache_hit_rate = 0.0;  // prompt tokens served from the cache / looked up
  KvUtilizationFigures kv;

  double output_tokens_per_s() const { return seconds > 0 ? output_tokens / seconds : 0.0; }
  double total_tokens_per_s() const { return seconds > 0 ? (prompt_tokens + output_tokens) / seconds : 0.0; }
};

// engine should be fresh: a warm prefix cache from an earlier run would skew the figures.
Expected<WorkloadResult> run_workload(Engine& engine, const std::vector<WorkloadRequest>& requests, ServingMode mode);

}  // namespace folio::cli
