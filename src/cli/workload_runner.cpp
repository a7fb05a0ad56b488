#include "cli/workload_runner.h"

#include <map>

#include "cli/request_timing.h"

namespace folio::cli {

const char* serving_mode_name(ServingMode mode) {
  return mode == ServingMode::kContinuousBatching ? "continuous batching" : "one at a time";
}

namespace {

// The engine does not say which requests hold KV blocks, only how many. With one priority the
// scheduler admits in arrival order and preempts the newest, so the holders are always the
// unfinished ones among the first (finished + holding) submissions.
int64_t reserved_tokens_in_pool(const std::vector<WorkloadRequest>& requests, const std::vector<size_t>& submitted,
                                const std::vector<bool>& finished, size_t num_finished, int32_t num_in_pool) {
  int64_t reserved = 0;
  const size_t end = std::min(submitted.size(), num_finished + static_cast<size_t>(num_in_pool));
  for (size_t k = 0; k < end; ++k) {
    const size_t i = submitted[k];
    if (!finished[i]) reserved += static_cast<int64_t>(requests[i].prompt.size()) + requests[i].max_tokens;
  }
  return reserved;
}

}  // namespace

Expected<WorkloadResult> run_workload(Engine& engine, const std::vector<WorkloadRequest>& requests, ServingMode mode) {
  RequestParams params;
  params.sampling.temperature = 0.0f;
  params.ignore_eos = true;

  std::vector<RequestTiming> timings(requests.size());
  std::vector<bool> finished(requests.size(), false);
  std::vector<size_t> submitted;  // request indices in submission order
  std::map<RequestId, size_t> index_of;
  size_t num_finished = 0;
  const auto submit = [&](size_t i) -> Status {
    RequestParams p = params;
    p.max_tokens = requests[i].max_tokens;
    Expected<RequestId> id = engine.add_request(requests[i].prompt, p);
    if (!id) return Status::error("request " + std::to_string(i) + ": " + id.error());
    timings[i].submitted = SteadyClock::now();
    index_of[*id] = i;
    submitted.push_back(i);
    return Status::ok();
  };

  KvUtilizationSampler kv_sampler(engine.max_model_len());
  const EngineMetrics before = engine.metrics();
  WorkloadResult result;
  const auto start = SteadyClock::now();
  const size_t initial =
      mode == ServingMode::kContinuousBatching ? requests.size() : std::min<size_t>(1, requests.size());
  for (size_t i = 0; i < initial; ++i) {
    if (Status s = submit(i); !s) return s;
  }
  while (engine.has_unfinished_requests()) {
    const std::vector<RequestOutput> outputs = engine.step();
    ++result.num_steps;
    const auto now = SteadyClock::now();
    for (const RequestOutput& out : outputs) {
      const size_t i = index_of.at(out.id);
      timings[i].record(out, now);
      if (out.finished) {
        finished[i] = true;
        ++num_finished;
      }
    }
    const EngineMetrics m = engine.metrics();
    kv_sampler.sample(m.kv, m.kv.num_sequences,
                      reserved_tokens_in_pool(requests, submitted, finished, num_finished, m.kv.num_sequences));
    if (mode == ServingMode::kOneAtATime && !engine.has_unfinished_requests() && submitted.size() < requests.size()) {
      if (Status s = submit(submitted.size()); !s) return s;
    }
  }
  result.seconds = seconds_between(start, SteadyClock::now());

  for (const RequestTiming& t : timings) {
    result.prompt_tokens += t.num_prompt_tokens;
    result.output_tokens += t.num_output_tokens;
    result.ttft_s.push_back(t.time_to_first_token_s());
    if (t.num_output_tokens > 1) result.tpot_s.push_back(t.time_per_output_token_s());
  }
  const EngineMetrics after = engine.metrics();
  result.prompt_tokens_computed = after.num_prompt_tokens_computed - before.num_prompt_tokens_computed;
  result.preemptions = after.num_preemptions - before.num_preemptions;
  const PrefixCacheStats& p0 = before.kv.prefix_cache;
  const PrefixCacheStats& p1 = after.kv.prefix_cache;
  const int64_t queried = p1.num_query_tokens - p0.num_query_tokens;
  result.prefix_cache_hit_rate =
      queried > 0 ? static_cast<double>(p1.num_hit_tokens - p0.num_hit_tokens) / queried : 0.0;
  result.kv = kv_sampler.figures();
  return result;
}

}  // namespace folio::cli
