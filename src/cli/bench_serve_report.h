// The results of `folio bench serve`: a text report in the shape of vLLM's (counts, duration,
// throughputs, then mean / median / P90 / P99 of TTFT, TPOT, ITL and E2E latency in ms) and
// the same figures, with the setup and every request's record, as JSON for --json.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/bench_serve_metrics.h"

namespace folio::cli {

// The run's setup as the report states it.
struct ServeRunSetup {
  std::string base_url;
  std::string endpoint;
  std::string model;
  std::string dataset;  // "sharegpt-like (scale 1, seed 0)", "fixed 128 in / 128 out"
  int32_t num_prompts = 0;
  double request_rate = 0.0;  // infinity: all at once
  int32_t max_concurrency = 0;
  bool ignore_eos = false;
  int32_t num_banned_tokens = 0;
  double temperature = 0.0;
  ServiceLevelObjectives slo;
  int32_t peak_in_flight = 0;
};

void print_serve_report(std::FILE* out, const ServeRunSetup& setup, const ServeMetrics& metrics,
                        const std::vector<RequestRecord>& records);

nlohmann::json serve_report_json(const ServeRunSetup& setup, const ServeMetrics& metrics,
                                 const std::vector<RequestRecord>& records);

}  // namespace folio::cli
