// How `folio bench batch` prints its rows: markdown tables (throughput and latency; KV
// utilization) or one JSON object per row.
#pragma once

#include <string>
#include <vector>

#include "cli/workload_runner.h"

namespace folio::cli {

struct BenchRow {
  std::string workload;                   // "mixed lengths", "shared prefix"
  std::string serving;                    // "continuous batching", "prefix cache off", ...
  std::vector<WorkloadResult> runs;       // one per repetition
  bool kv_utilization_comparable = true;  // no blocks shared between requests

  // The repetition with the median output tok/s: its latencies and KV figures are reported.
  const WorkloadResult& median_run() const;
  std::string output_tokens_per_s_text() const;  // "123.4" or "123.4 (120.1-125.0)"
};

void print_markdown(const std::vector<BenchRow>& rows, int32_t max_model_len);
void print_json(const std::vector<BenchRow>& rows, int32_t max_model_len);
// "a / b: 2.31x output tok/s" (medians), for the lines under the table.
std::string ratio_text(const BenchRow& a, const BenchRow& b);

}  // namespace folio::cli
