// Request latency distributions for /metrics: Prometheus histograms (cumulative bucket
// counts, sum, count) of time to first token, time per output token, end-to-end latency and
// request sizes, named and bucketed like vLLM's so existing dashboards read them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace folio::server {

class Histogram {
 public:
  explicit Histogram(std::span<const double> upper_bounds);

  void observe(double value);
  // "# HELP/# TYPE" lines and the _bucket{le=...}, _sum and _count samples; labels is the
  // text inside the braces every sample carries (e.g. model_name="m").
  std::string prometheus_text(const std::string& name, const std::string& help, const std::string& labels) const;

  const std::vector<double>& upper_bounds() const { return bounds_; }
  const std::vector<int64_t>& counts() const { return counts_; }  // per bucket, not cumulative; +Inf last
  int64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;
  int64_t count_ = 0;
  double sum_ = 0.0;
};

struct RequestLatencies {
  RequestLatencies();
  // One finished sequence (each of a request's n samples counts), e2e measured by the caller
  // from submission, so time spent queued before the engine saw it counts.
  void observe_finished(const RequestOutput& out, double e2e_seconds);

  Histogram time_to_first_token;
  Histogram time_per_output_token;
  Histogram e2e_latency;
  Histogram prompt_tokens;
  Histogram generation_tokens;
};

}  // namespace folio::server
