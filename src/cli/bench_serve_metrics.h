// What `folio bench serve` measures, as plain numbers: one RequestRecord per request as the
// client saw it, and the figures vLLM's `bench serve` reports, computed from them by pure
// functions (no clock, no I/O), so that the arithmetic is tested on hand-computed inputs.
//
//   sent ──── first content chunk ── chunk ── chunk ── ... ── last chunk ── stream end
//   |<-- TTFT -->|<-ITL->|<-ITL->|                                          |
//   |<------------------------------- E2E latency ------------------------->|
//   TPOT = (E2E - TTFT) / (output tokens - 1): the mean time per token after the first.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/percentile.h"  // the reports' percentiles
#include "core/status.h"

namespace folio::cli {

// Where a request's output token count came from.
enum class TokenCountSource {
  kServerUsage,  // the usage object of the stream's last chunk
  // The number of content chunks, for servers that stream no usage (llama-cpp-python). They
  // send a chunk per token but hold back a token that ends inside a UTF-8 character, so this
  // can undercount; encoding the text again (vLLM's fallback) undercounted more in a check
  // against llama-cpp-python (BPE merges across token seams).
  kChunks,
};

struct RequestRecord {
  bool success = false;
  std::string error;           // why it failed; empty on success
  double sent_s = 0.0;         // when it was sent, from the start of the benchmark
  double ttft_s = 0.0;         // time to the first content chunk
  double e2e_s = 0.0;          // time to the end of the stream
  std::vector<double> itls_s;  // gaps between consecutive content chunks
  int32_t prompt_tokens = 0;   // the server's count when it reported usage, else ours
  bool prompt_tokens_from_server = false;
  int32_t requested_output_tokens = 0;  // max_tokens
  int32_t output_tokens = 0;
  TokenCountSource output_tokens_source = TokenCountSource::kChunks;

  // 0 with fewer than two output tokens (there is no "after the first").
  double tpot_s() const;
};

// Service-level objectives for goodput; a request is good when it meets every one given.
struct ServiceLevelObjectives {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  std::optional<double> e2el_ms;
  bool empty() const { return !ttft_ms && !tpot_ms && !e2el_ms; }
};

// "ttft:500", "tpot:50", "e2el:3000" (milliseconds), any subset, each at most once.
Expected<ServiceLevelObjectives> parse_service_level_objectives(const std::vector<std::string>& specs);
bool meets_objectives(const RequestRecord& record, const ServiceLevelObjectives& slo);

// In milliseconds. All zeros when there are no values.
struct LatencyStats {
  double mean_ms = 0.0;
  double median_ms = 0.0;
  double p90_ms = 0.0;
  double p99_ms = 0.0;
  double std_ms = 0.0;  // population standard deviation
  size_t count = 0;
};
LatencyStats latency_stats(const std::vector<double>& seconds);

struct ServeMetrics {
  int32_t num_requests = 0;
  int32_t num_succeeded = 0;
  int32_t num_failed = 0;
  double duration_s = 0.0;
  // Over successful requests only, as every throughput figure below.
  int64_t total_prompt_tokens = 0;
  int64_t total_output_tokens = 0;
  int64_t total_requested_output_tokens = 0;
  int32_t num_prompt_counts_from_server = 0;
  int32_t num_output_counts_from_usage = 0;
  int32_t num_output_counts_from_chunks = 0;
  double request_throughput = 0.0;        // successful requests / s
  double output_token_throughput = 0.0;   // output tokens / s
  double total_token_throughput = 0.0;    // (prompt + output tokens) / s
  std::optional<double> request_goodput;  // requests meeting every SLO / s; only with SLOs
  int32_t num_good = 0;
  LatencyStats ttft;
  LatencyStats tpot;  // requests with two or more output tokens
  LatencyStats itl;   // every gap of every request, pooled
  LatencyStats e2el;
};

// duration_s: from the first request sent to the last one finished.
ServeMetrics compute_serve_metrics(const std::vector<RequestRecord>& records, double duration_s,
                                   const ServiceLevelObjectives& slo);

}  // namespace folio::cli
