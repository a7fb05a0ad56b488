#include "cli/bench_serve_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace folio::cli {

double RequestRecord::tpot_s() const {
  if (output_tokens < 2) return 0.0;
  return (e2e_s - ttft_s) / (output_tokens - 1);
}

Expected<ServiceLevelObjectives> parse_service_level_objectives(const std::vector<std::string>& specs) {
  ServiceLevelObjectives slo;
  for (const std::string& spec : specs) {
    const size_t colon = spec.find(':');
    if (colon == std::string::npos) return Status::error("goodput target '" + spec + "' is not NAME:MILLISECONDS");
    const std::string name = spec.substr(0, colon);
    const std::string value_text = spec.substr(colon + 1);
    double value = 0.0;
    size_t used = 0;
    try {
      value = std::stod(value_text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != value_text.size() || !std::isfinite(value) || value <= 0.0) {
      return Status::error("goodput target '" + spec + "' needs a positive number of milliseconds");
    }
    std::optional<double>* target = name == "ttft"   ? &slo.ttft_ms
                                    : name == "tpot" ? &slo.tpot_ms
                                    : name == "e2el" ? &slo.e2el_ms
                                                     : nullptr;
    if (target == nullptr) return Status::error("goodput target '" + name + "' is not one of ttft, tpot, e2el");
    if (*target) return Status::error("goodput target '" + name + "' is given twice");
    *target = value;
  }
  return slo;
}

bool meets_objectives(const RequestRecord& record, const ServiceLevelObjectives& slo) {
  if (!record.success) return false;
  if (slo.ttft_ms && record.ttft_s * 1e3 > *slo.ttft_ms) return false;
  if (slo.tpot_ms && record.tpot_s() * 1e3 > *slo.tpot_ms) return false;
  if (slo.e2el_ms && record.e2e_s * 1e3 > *slo.e2el_ms) return false;
  return true;
}

LatencyStats latency_stats(const std::vector<double>& seconds) {
  LatencyStats stats;
  stats.count = seconds.size();
  if (seconds.empty()) return stats;
  const double n = static_cast<double>(seconds.size());
  const double mean = std::accumulate(seconds.begin(), seconds.end(), 0.0) / n;
  double squares = 0.0;
  for (const double s : seconds) squares += (s - mean) * (s - mean);
  stats.mean_ms = mean * 1e3;
  stats.std_ms = std::sqrt(squares / n) * 1e3;
  stats.median_ms = percentile(seconds, 50.0) * 1e3;
  stats.p90_ms = percentile(seconds, 90.0) * 1e3;
  stats.p99_ms = percentile(seconds, 99.0) * 1e3;
  return stats;
}

ServeMetrics compute_serve_metrics(const std::vector<RequestRecord>& records, double duration_s,
                                   const ServiceLevelObjectives& slo) {
  ServeMetrics m;
  m.num_requests = static_cast<int32_t>(records.size());
  m.duration_s = duration_s;
  std::vector<double> ttfts, tpots, itls, e2els;
  for (const RequestRecord& r : records) {
    if (!r.success) {
      ++m.num_failed;
      continue;
    }
    ++m.num_succeeded;
    m.total_prompt_tokens += r.prompt_tokens;
    m.total_output_tokens += r.output_tokens;
    m.total_requested_output_tokens += r.requested_output_tokens;
    m.num_prompt_counts_from_server += r.prompt_tokens_from_server ? 1 : 0;
    switch (r.output_tokens_source) {
      case TokenCountSource::kServerUsage: ++m.num_output_counts_from_usage; break;
      case TokenCountSource::kChunks: ++m.num_output_counts_from_chunks; break;
    }
    ttfts.push_back(r.ttft_s);
    if (r.output_tokens >= 2) tpots.push_back(r.tpot_s());
    itls.insert(itls.end(), r.itls_s.begin(), r.itls_s.end());
    e2els.push_back(r.e2e_s);
    if (!slo.empty() && meets_objectives(r, slo)) ++m.num_good;
  }
  if (duration_s > 0.0) {
    m.request_throughput = m.num_succeeded / duration_s;
    m.output_token_throughput = static_cast<double>(m.total_output_tokens) / duration_s;
    m.total_token_throughput = static_cast<double>(m.total_prompt_tokens + m.total_output_tokens) / duration_s;
    if (!slo.empty()) m.request_goodput = m.num_good / duration_s;
  } else if (!slo.empty()) {
    m.request_goodput = 0.0;
  }
  m.ttft = latency_stats(ttfts);
  m.tpot = latency_stats(tpots);
  m.itl = latency_stats(itls);
  m.e2el = latency_stats(e2els);
  return m;
}

}  // namespace folio::cli
