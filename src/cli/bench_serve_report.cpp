#include "cli/bench_serve_report.h"

#include <cmath>
#include <map>
#include <string>

namespace folio::cli {

using nlohmann::json;

namespace {

std::string number(double value, int decimals = 2) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", decimals, value);
  return text;
}

void row(std::FILE* out, const std::string& label, const std::string& value) {
  std::fprintf(out, "%-42s%s\n", (label + ":").c_str(), value.c_str());
}

void rule(std::FILE* out, const std::string& title, char fill) {
  constexpr size_t kWidth = 60;
  const std::string middle = title.empty() ? "" : " " + title + " ";
  const size_t left = (kWidth - std::min(kWidth, middle.size())) / 2;
  const size_t right = kWidth - std::min(kWidth, middle.size() + left);
  std::fprintf(out, "%s%s%s\n", std::string(left, fill).c_str(), middle.c_str(), std::string(right, fill).c_str());
}

void latency_block(std::FILE* out, const std::string& title, const std::string& name, const LatencyStats& s) {
  rule(out, title, '-');
  row(out, "Mean " + name + " (ms)", number(s.mean_ms));
  row(out, "Median " + name + " (ms)", number(s.median_ms));
  row(out, "P90 " + name + " (ms)", number(s.p90_ms));
  row(out, "P99 " + name + " (ms)", number(s.p99_ms));
}

std::string rate_text(double rate) {
  return std::isinf(rate) ? "inf (all at once)" : number(rate) + " (Poisson arrivals)";
}

std::string slo_text(const ServiceLevelObjectives& slo) {
  std::string text;
  const auto add = [&](const char* name, const std::optional<double>& ms) {
    if (!ms) return;
    text += (text.empty() ? "" : ", ") + std::string(name) + " <= " + number(*ms, 0) + " ms";
  };
  add("TTFT", slo.ttft_ms);
  add("TPOT", slo.tpot_ms);
  add("E2EL", slo.e2el_ms);
  return text;
}

const char* source_name(TokenCountSource source) {
  switch (source) {
    case TokenCountSource::kServerUsage: return "usage";
    case TokenCountSource::kChunks: return "chunks";
  }
  return "unknown";
}

json latency_json(const LatencyStats& s) {
  return json{{"mean_ms", s.mean_ms}, {"median_ms", s.median_ms}, {"p90_ms", s.p90_ms},
              {"p99_ms", s.p99_ms},   {"std_ms", s.std_ms},       {"count", s.count}};
}

json optional_json(const std::optional<double>& value) {
  return value ? json(*value) : json(nullptr);
}

}  // namespace

void print_serve_report(std::FILE* out, const ServeRunSetup& setup, const ServeMetrics& m,
                        const std::vector<RequestRecord>& records) {
  rule(out, "Serving Benchmark Result", '=');
  row(out, "Endpoint", setup.base_url + setup.endpoint);
  row(out, "Model", setup.model);
  row(out, "Dataset",
      setup.dataset + ", " + std::to_string(setup.num_prompts) + " prompts" + (setup.ignore_eos ? ", ignore_eos" : "") +
          (setup.num_banned_tokens > 0 ? ", " + std::to_string(setup.num_banned_tokens) + " EOS ids biased -100" : ""));
  row(out, "Request rate (req/s)", rate_text(setup.request_rate));
  row(out, "Maximum request concurrency",
      (setup.max_concurrency > 0 ? std::to_string(setup.max_concurrency) : std::string("none")) + " (peak in flight " +
          std::to_string(setup.peak_in_flight) + ")");
  row(out, "Successful requests", std::to_string(m.num_succeeded));
  row(out, "Failed requests", std::to_string(m.num_failed));
  row(out, "Benchmark duration (s)", number(m.duration_s));
  row(out, "Total input tokens",
      std::to_string(m.total_prompt_tokens) + " (server's count for " +
          std::to_string(m.num_prompt_counts_from_server) + " of " + std::to_string(m.num_succeeded) + ")");
  row(out, "Mean input tokens per request",
      number(m.num_succeeded > 0 ? static_cast<double>(m.total_prompt_tokens) / m.num_succeeded : 0.0, 1));
  std::string counted = "asked " + std::to_string(m.total_requested_output_tokens) + "; counted by ";
  counted += "usage " + std::to_string(m.num_output_counts_from_usage);
  if (m.num_output_counts_from_chunks > 0) counted += ", chunks " + std::to_string(m.num_output_counts_from_chunks);
  row(out, "Total generated tokens", std::to_string(m.total_output_tokens) + " (" + counted + ")");
  row(out, "Request throughput (req/s)", number(m.request_throughput));
  row(out, "Output token throughput (tok/s)", number(m.output_token_throughput));
  row(out, "Total token throughput (tok/s)", number(m.total_token_throughput));
  if (m.request_goodput) {
    row(out, "Request goodput (req/s)",
        number(*m.request_goodput) + " (" + std::to_string(m.num_good) + " met " + slo_text(setup.slo) + ")");
  }
  latency_block(out, "Time to First Token", "TTFT", m.ttft);
  latency_block(out, "Time per Output Token (excl. 1st token)", "TPOT", m.tpot);
  latency_block(out, "Inter-token Latency", "ITL", m.itl);
  latency_block(out, "End-to-end Latency", "E2EL", m.e2el);
  rule(out, "", '=');
  if (m.num_failed > 0) {
    // The same failure many times is one line: the count tells how widespread it is.
    std::map<std::string, int> errors;
    for (const RequestRecord& r : records) {
      if (!r.success) ++errors[r.error];
    }
    std::fprintf(out, "Failures:\n");
    int shown = 0;
    for (const auto& [message, count] : errors) {
      if (++shown > 5) {
        std::fprintf(out, "  ... and %zu other kinds\n", errors.size() - 5);
        break;
      }
      std::fprintf(out, "  %d x %s\n", count, message.c_str());
    }
  }
}

json serve_report_json(const ServeRunSetup& setup, const ServeMetrics& m, const std::vector<RequestRecord>& records) {
  json requests = json::array();
  for (const RequestRecord& r : records) {
    requests.push_back(json{{"success", r.success},
                            {"error", r.error},
                            {"sent_s", r.sent_s},
                            {"ttft_ms", r.ttft_s * 1e3},
                            {"tpot_ms", r.tpot_s() * 1e3},
                            {"e2el_ms", r.e2e_s * 1e3},
                            {"itls_ms",
                             [&] {
                               json itls = json::array();
                               for (const double s : r.itls_s) itls.push_back(s * 1e3);
                               return itls;
                             }()},
                            {"prompt_tokens", r.prompt_tokens},
                            {"prompt_tokens_from_server", r.prompt_tokens_from_server},
                            {"requested_output_tokens", r.requested_output_tokens},
                            {"output_tokens", r.output_tokens},
                            {"output_tokens_source", source_name(r.output_tokens_source)}});
  }
  return json{
      {"base_url", setup.base_url},
      {"endpoint", setup.endpoint},
      {"model", setup.model},
      {"dataset", setup.dataset},
      {"num_prompts", setup.num_prompts},
      {"request_rate", std::isinf(setup.request_rate) ? json("inf") : json(setup.request_rate)},
      {"max_concurrency", setup.max_concurrency > 0 ? json(setup.max_concurrency) : json(nullptr)},
      {"peak_in_flight", setup.peak_in_flight},
      {"ignore_eos", setup.ignore_eos},
      {"num_banned_tokens", setup.num_banned_tokens},
      {"temperature", setup.temperature},
      {"slo", json{{"ttft_ms", optional_json(setup.slo.ttft_ms)},
                   {"tpot_ms", optional_json(setup.slo.tpot_ms)},
                   {"e2el_ms", optional_json(setup.slo.e2el_ms)}}},
      {"completed", m.num_succeeded},
      {"failed", m.num_failed},
      {"duration_s", m.duration_s},
      {"total_input_tokens", m.total_prompt_tokens},
      {"total_output_tokens", m.total_output_tokens},
      {"total_requested_output_tokens", m.total_requested_output_tokens},
      {"input_token_counts_from_server", m.num_prompt_counts_from_server},
      {"output_token_counts",
       json{{"usage", m.num_output_counts_from_usage}, {"chunks", m.num_output_counts_from_chunks}}},
      {"request_throughput", m.request_throughput},
      {"output_throughput", m.output_token_throughput},
      {"total_token_throughput", m.total_token_throughput},
      {"request_goodput", optional_json(m.request_goodput)},
      {"ttft", latency_json(m.ttft)},
      {"tpot", latency_json(m.tpot)},
      {"itl", latency_json(m.itl)},
      {"e2el", latency_json(m.e2el)},
      {"requests", std::move(requests)},
  };
}

}  // namespace folio::cli
