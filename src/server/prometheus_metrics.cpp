#include "server/prometheus_metrics.h"

#include <cstdio>

namespace folio::server {
namespace {

// Label values escape backslash, quote and newline.
std::string escape_label(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

class MetricsWriter {
 public:
  explicit MetricsWriter(const std::string& model_name)
      : model_label_("model_name=\"" + escape_label(model_name) + "\""), labels_("{" + model_label_ + "}") {}

  void add(const char* name, const char* type, const char* help, double value) {
    char number[64];
    std::snprintf(number, sizeof(number), "%.17g", value);
    text_ += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + labels_ +
             " " + number + "\n";
  }
  void add_finished(const char* reason, int64_t value) {
    text_ += std::string("folio:request_success_total") + "{" + model_label_ + ",finished_reason=\"" + reason + "\"} " +
             std::to_string(value) + "\n";
  }
  void add_histogram(const char* name, const char* help, const Histogram& histogram) {
    text_ += histogram.prometheus_text(name, help, model_label_);
  }
  std::string& text() { return text_; }
  const std::string& model_label() const { return model_label_; }

 private:
  std::string model_label_;
  std::string labels_;
  std::string text_;
};

}  // namespace

std::string prometheus_metrics_text(const WorkerMetrics& metrics, const std::string& model_name) {
  const EngineMetrics& e = metrics.engine;
  MetricsWriter w(model_name);
  w.add("folio:num_requests_running", "gauge", "Requests in the running batch.", e.num_running);
  w.add("folio:num_requests_waiting", "gauge", "Requests waiting to be scheduled (submitted ones included).",
        e.num_waiting + metrics.num_queued_submissions);
  w.add("folio:num_requests_swapped", "gauge", "Requests swapped out to the host KV pool.", e.num_swapped);
  w.add("folio:kv_cache_usage_perc", "gauge", "Fraction of device KV blocks in use (1 = full).", e.kv.usage);
  w.add("folio:kv_cache_bytes_per_token", "gauge",
        "Bytes of K and V one token takes in the cache, all layers, scales included.", e.kv_bytes_per_token);
  w.add("folio:kv_cache_tokens_total", "gauge",
        "Token slots the device KV pool holds (fp8 / KIVI: blocks over idle staging blocks included).",
        static_cast<double>(e.kv.num_blocks) * e.kv_block_size);
  w.add("folio:kv_cache_overlay_blocks_in_use", "gauge",
        "Sealed blocks held in staging blocks' memory (fp8 / KIVI; kv/block_pool.h).",
        static_cast<double>(e.kv.num_used_overlay_blocks));
  // The gauge reads 0 once a run is over; the counter says whether the overlay was ever used.
  w.add("folio:kv_cache_overlay_allocations_total", "counter",
        "Sealed blocks handed out in staging blocks' memory (fp8 / KIVI; kv/block_pool.h).",
        static_cast<double>(e.kv.num_overlay_allocations));
  // The format as an info-style gauge (1), labelled, as Prometheus expresses strings.
  w.text() +=
      "# HELP folio:kv_cache_dtype_info The KV cache format (--kv-cache-dtype).\n"
      "# TYPE folio:kv_cache_dtype_info gauge\nfolio:kv_cache_dtype_info{" +
      w.model_label() + ",dtype=\"" + std::string(kv_format_name(e.kv_format)) + "\"} 1\n";
  // Where the model runs (device, ISA or GPU, tensor-parallel ranks), for an operator.
  w.text() +=
      "# HELP folio:device_info The executor: device and, split over ranks, the tensor parallelism.\n"
      "# TYPE folio:device_info gauge\nfolio:device_info{" +
      w.model_label() + ",device=\"" + escape_label(e.device) + "\"} 1\n";
  w.add("folio:prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
        static_cast<double>(e.kv.prefix_cache.num_query_tokens));
  w.add("folio:prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.",
        static_cast<double>(e.kv.prefix_cache.num_hit_tokens));
  w.add("folio:num_preemptions_total", "counter", "Preemptions of running requests.",
        static_cast<double>(e.num_preemptions));
  w.add("folio:prompt_tokens_total", "counter", "Prompt tokens computed (prefix-cache hits excluded).",
        static_cast<double>(e.num_prompt_tokens_computed));
  w.add("folio:generation_tokens_total", "counter", "Tokens generated.", static_cast<double>(e.num_generated_tokens));
  w.add("folio:request_aborted_total", "counter", "Requests aborted (client gone or server stopping).",
        static_cast<double>(metrics.counters.num_requests_aborted));
  w.add("folio:request_rejected_total", "counter", "Requests the engine refused (too long, bad values).",
        static_cast<double>(metrics.counters.num_requests_rejected));
  w.text() +=
      "# HELP folio:request_success_total Sequences finished, by reason.\n"
      "# TYPE folio:request_success_total counter\n";
  w.add_finished("stop", metrics.counters.num_requests_finished_stop);
  w.add_finished("length", metrics.counters.num_requests_finished_length);
  const RequestLatencies& l = metrics.latencies;
  w.add_histogram("folio:time_to_first_token_seconds", "Time to first token (from arrival at the engine).",
                  l.time_to_first_token);
  w.add_histogram("folio:time_per_output_token_seconds", "Mean time per output token after the first, per sequence.",
                  l.time_per_output_token);
  w.add_histogram("folio:e2e_request_latency_seconds", "End-to-end latency, from submission to the last token.",
                  l.e2e_latency);
  w.add_histogram("folio:request_prompt_tokens", "Prompt tokens per sequence.", l.prompt_tokens);
  w.add_histogram("folio:request_generation_tokens", "Generated tokens per sequence.", l.generation_tokens);
  // Speculative decoding, vLLM's spec_decode counters under folio's prefix; absent when off.
  const SpeculationMetrics& s = e.speculation;
  if (!s.proposer.empty()) {
    w.add("folio:spec_decode_num_drafts_total", "counter", "Proposals made (one per request and step that proposed).",
          static_cast<double>(s.num_drafts));
    w.add("folio:spec_decode_num_draft_tokens_total", "counter", "Tokens proposed.",
          static_cast<double>(s.num_draft_tokens));
    w.add("folio:spec_decode_num_accepted_tokens_total", "counter", "Proposed tokens the target accepted.",
          static_cast<double>(s.num_accepted_tokens));
    w.add("folio:spec_decode_acceptance_rate", "gauge", "Accepted tokens / proposed tokens, since start.",
          s.acceptance_rate());
    w.add("folio:spec_decode_mean_acceptance_length", "gauge",
          "Tokens a speculating request emits per step (1 + accepted / proposals), since start.",
          s.mean_acceptance_length());
    w.add("folio:spec_decode_num_speculative_tokens", "gauge",
          "Tokens per proposal the controller chose at the latest step (0: speculation paused by the load).",
          static_cast<double>(s.last_num_tokens));
    w.text() +=
        "# HELP folio:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens by position in the proposal.\n"
        "# TYPE folio:spec_decode_num_accepted_tokens_per_pos_total counter\n";
    for (size_t i = 0; i < s.accepted_per_position.size(); ++i) {
      w.text() += "folio:spec_decode_num_accepted_tokens_per_pos_total{" + w.model_label() + ",position=\"" +
                  std::to_string(i) + "\"} " + std::to_string(s.accepted_per_position[i]) + "\n";
    }
  }
  return std::move(w.text());
}

}  // namespace folio::server
