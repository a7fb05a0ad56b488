#include "cli/bench_batch_report.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace folio::cli {
namespace {

std::string format(const char* fmt, double a, double b = 0.0, double c = 0.0) {
  char buffer[128];
  std::snprintf(buffer, sizeof buffer, fmt, a, b, c);
  return buffer;
}

std::vector<double> output_rates(const BenchRow& row) {
  std::vector<double> rates;
  for (const WorkloadResult& r : row.runs) rates.push_back(r.output_tokens_per_s());
  return rates;
}

std::string percent(double fraction) {
  return format("%.1f%%", 100.0 * fraction);
}

}  // namespace

const WorkloadResult& BenchRow::median_run() const {
  std::vector<size_t> order(runs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return runs[a].output_tokens_per_s() < runs[b].output_tokens_per_s(); });
  return runs[order[order.size() / 2]];
}

std::string BenchRow::output_tokens_per_s_text() const {
  const Spread s = spread_of(output_rates(*this));
  if (runs.size() == 1) return format("%.1f", s.median);
  return format("%.1f (%.1f-%.1f)", s.median, s.min, s.max);
}

std::string ratio_text(const BenchRow& a, const BenchRow& b) {
  const double ratio = spread_of(output_rates(a)).median / spread_of(output_rates(b)).median;
  return a.workload + ": " + a.serving + " / " + b.serving + " = " + format("%.2fx", ratio) + " output tok/s (medians)";
}

void print_markdown(const std::vector<BenchRow>& rows, int32_t max_model_len) {
  std::printf(
      "| workload | serving | requests | prompt tok (computed) | output tok | time s | output tok/s | "
      "total tok/s | TTFT mean / median s | TPOT mean ms | preemptions | prefix-cache hits | peak KV blocks |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const BenchRow& row : rows) {
    const WorkloadResult& r = row.median_run();
    const Spread ttft = spread_of(r.ttft_s);
    std::printf("| %s | %s | %zu | %lld (%lld) | %lld | %.1f | %s | %.1f | %.2f / %.2f | %.1f | %lld | %s | %d |\n",
                row.workload.c_str(), row.serving.c_str(), r.ttft_s.size(), static_cast<long long>(r.prompt_tokens),
                static_cast<long long>(r.prompt_tokens_computed), static_cast<long long>(r.output_tokens), r.seconds,
                row.output_tokens_per_s_text().c_str(), r.total_tokens_per_s(), ttft.mean, ttft.median,
                spread_of(r.tpot_s).mean * 1e3, static_cast<long long>(r.preemptions),
                percent(r.prefix_cache_hit_rate).c_str(), r.kv.max_used_blocks);
  }
  std::printf("\nKV utilization, sampled after every step (tokens held / token slots allocated):\n\n");
  std::printf(
      "| workload | serving | steps | paged mean | paged min | contiguous, prompt + max_tokens: mean | min | "
      "contiguous, max_model_len %d: mean | min | most requests holding KV |\n",
      max_model_len);
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (const BenchRow& row : rows) {
    // With shared prefixes one block serves many requests, so held / reserved stops meaning
    // waste; the peak-blocks column above shows what sharing saves instead.
    if (!row.kv_utilization_comparable) continue;
    const KvUtilizationFigures& kv = row.median_run().kv;
    std::printf("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %d |\n", row.workload.c_str(), row.serving.c_str(),
                kv.num_samples, percent(kv.paged.mean).c_str(), percent(kv.paged.min).c_str(),
                percent(kv.contiguous_request.mean).c_str(), percent(kv.contiguous_request.min).c_str(),
                percent(kv.contiguous_max_len.mean).c_str(), percent(kv.contiguous_max_len.min).c_str(),
                kv.max_requests_in_pool);
  }
}

void print_json(const std::vector<BenchRow>& rows, int32_t max_model_len) {
  for (const BenchRow& row : rows) {
    const WorkloadResult& r = row.median_run();
    const Spread rates = spread_of(output_rates(row));
    const Spread ttft = spread_of(r.ttft_s);
    nlohmann::ordered_json j = {
        // keys in this order, not sorted
        {"workload", row.workload},
        {"serving", row.serving},
        {"requests", r.ttft_s.size()},
        {"repetitions", row.runs.size()},
        {"prompt_tokens", r.prompt_tokens},
        {"prompt_tokens_computed", r.prompt_tokens_computed},
        {"output_tokens", r.output_tokens},
        {"seconds", r.seconds},
        {"output_tps_median", rates.median},
        {"output_tps_min", rates.min},
        {"output_tps_max", rates.max},
        {"total_tps", r.total_tokens_per_s()},
        {"ttft_mean_s", ttft.mean},
        {"ttft_median_s", ttft.median},
        {"tpot_mean_s", spread_of(r.tpot_s).mean},
        {"preemptions", r.preemptions},
        {"prefix_cache_hit_rate", r.prefix_cache_hit_rate},
        {"kv_paged_mean", r.kv.paged.mean},
        {"kv_paged_min", r.kv.paged.min},
        {"kv_contiguous_request_mean", r.kv.contiguous_request.mean},
        {"kv_contiguous_request_min", r.kv.contiguous_request.min},
        {"kv_contiguous_max_model_len_mean", r.kv.contiguous_max_len.mean},
        {"kv_contiguous_max_model_len_min", r.kv.contiguous_max_len.min},
        {"kv_peak_used_blocks", r.kv.max_used_blocks},
        {"max_model_len", max_model_len},
        {"steps", r.num_steps},
    };
    std::printf("%s\n", j.dump().c_str());
  }
}

}  // namespace folio::cli
