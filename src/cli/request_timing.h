// Per-request latencies seen from outside the engine (TTFT, TPOT), for `folio run` summaries
// and `folio bench batch`. Stamped when step() returns, which is when the engine stamps its
// own: tokens of one step all appear at its end.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/engine.h"

namespace folio::cli {

using SteadyClock = std::chrono::steady_clock;

double seconds_between(SteadyClock::time_point from, SteadyClock::time_point to);

struct RequestTiming {
  SteadyClock::time_point submitted;
  std::optional<SteadyClock::time_point> first_token;
  SteadyClock::time_point last_token;
  int32_t num_prompt_tokens = 0;
  int32_t num_output_tokens = 0;
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;

  void record(const RequestOutput& out, SteadyClock::time_point now);
  double time_to_first_token_s() const;
  // Mean time per output token after the first (vLLM's TPOT); 0 with fewer than two tokens.
  double time_per_output_token_s() const;
};

struct Spread {
  double mean = 0.0;
  double median = 0.0;
  double min = 0.0;
  double max = 0.0;
};
Spread spread_of(std::vector<double> values);

}  // namespace folio::cli
