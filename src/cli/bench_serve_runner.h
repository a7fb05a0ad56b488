// Drives one `folio bench serve` run: sends every request at its arrival time (Poisson, or all
// at once), holds back those over --max-concurrency until a request in flight ends (the
// client-side semaphore of vLLM's benchmark: the wait is not part of a request's latency),
// and collects one RequestRecord per request. Single-threaded: everything happens inside
// HttpClient::run().
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "cli/bench_serve_dataset.h"
#include "cli/bench_serve_http_client.h"
#include "cli/bench_serve_metrics.h"
#include "cli/bench_serve_openai.h"
#include "cli/bench_serve_progress.h"

namespace folio::cli {

struct ServeRunOptions {
  std::string endpoint = "/v1/completions";  // after the base URL's prefix
  ApiKind kind = ApiKind::kCompletions;
  RequestFields fields;
  double request_rate = std::numeric_limits<double>::infinity();  // requests per second
  int32_t max_concurrency = 0;                                    // 0: no limit
  uint64_t seed = 0;                                              // of the arrival times
  double timeout_s = 0.0;                                         // per request; 0: none
  ProgressLine::Mode progress = ProgressLine::Mode::kOff;
};

struct ServeRunResult {
  std::vector<RequestRecord> records;  // in the order of the requests
  double duration_s = 0.0;             // first send to last completion
  int32_t peak_in_flight = 0;
};

ServeRunResult run_serve_requests(HttpClient& client, const std::vector<ServeBenchRequest>& requests,
                                  const ServeRunOptions& options);

}  // namespace folio::cli
