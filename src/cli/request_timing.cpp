#include "cli/request_timing.h"

#include <algorithm>
#include <numeric>

namespace folio::cli {

double seconds_between(SteadyClock::time_point from, SteadyClock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

void RequestTiming::record(const RequestOutput& out, SteadyClock::time_point now) {
  if (!out.new_tokens.empty()) {
    if (!first_token) first_token = now;
    last_token = now;
  }
  num_prompt_tokens = out.num_prompt_tokens;
  num_output_tokens = out.num_output_tokens;
  finished = out.finished;
  finish_reason = out.finish_reason;
}

double RequestTiming::time_to_first_token_s() const {
  return first_token ? seconds_between(submitted, *first_token) : 0.0;
}

double RequestTiming::time_per_output_token_s() const {
  if (!first_token || num_output_tokens < 2) return 0.0;
  return seconds_between(*first_token, last_token) / (num_output_tokens - 1);
}

Spread spread_of(std::vector<double> values) {
  Spread s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(n);
  s.median = n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
  s.min = values.front();
  s.max = values.back();
  return s;
}

}  // namespace folio::cli
