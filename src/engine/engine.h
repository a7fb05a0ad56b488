// The engine: requests in, per-request output streams out. One thread drives it; each step()
// is schedule -> execute -> update (sample, detokenize, check stops, free what finished).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "engine/beam_search.h"
#include "engine/model_executor.h"
#include "engine/model_runner.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "kv/kv_cache_manager.h"
#include "model/llama_model.h"
#include "text/tokenizer.h"

namespace folio {

struct EngineConfig {
  int64_t kv_cache_bytes = int64_t{256} << 20;  // device KV pool (K and V, all layers)
  int32_t block_size = 16;
  bool enable_prefix_caching = true;
  int64_t swap_space_bytes = 0;                 // host pool for preemption by swap
  int32_t max_model_len = 0;                    // 0: the model's trained context
  SchedulerConfig scheduler;
};

struct RequestOutput {
  RequestId id = 0;
  int32_t index = 0;                      // which of the request's n parallel samples
  std::vector<int32_t> new_tokens;
  std::vector<SampleResult> new_samples;  // logprobs of new_tokens, when asked for
  std::string text_delta;                 // complete UTF-8 only; stop strings never appear
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  int32_t num_prompt_tokens = 0;
  int32_t num_output_tokens = 0;
  double time_to_first_token_s = 0.0;      // set when finished
  double time_per_output_token_s = 0.0;    // set when finished (mean after the first token)
};

struct EngineMetrics {
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int32_t num_swapped = 0;
  int64_t num_preemptions = 0;
  int64_t num_prompt_tokens_computed = 0;  // prefill work done (prefix-cache hits excluded)
  int64_t num_generated_tokens = 0;
  // Where step() spends its time (host clock): in the executor (forward, and sampling when
  // the executor samples), and in update (CPU sampling, detokenizing, stop checks).
  double execute_seconds = 0.0;
  double update_seconds = 0.0;
  int64_t num_steps = 0;
  int64_t num_device_sampled_steps = 0;  // steps whose tokens the executor chose
  KvCacheMetrics kv;
};

// Result of the offline batch call.
struct Generation {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason finish_reason = FinishReason::kNone;
  double time_to_first_token_s = 0.0;
  double time_per_output_token_s = 0.0;
};

struct BeamHypothesis {
  std::vector<int32_t> tokens;
  double cum_logprob = 0.0;
  double score = 0.0;
  FinishReason reason = FinishReason::kNone;
};

// The live beams and ended hypotheses of one beam-search request.
struct BeamGroup {
  RequestParams params;
  int32_t num_prompt_tokens = 0;
  std::vector<Request*> live;
  std::vector<BeamHypothesis> ended;
  int64_t peak_blocks = 0;  // for reports against full copies
};

class Engine {
 public:
  // The CPU path: the engine owns a KV pool of config.kv_cache_bytes in host memory.
  Engine(LlamaModel& model, Backend& backend, const Tokenizer& tokenizer, const EngineConfig& config);
  // Any executor (the CUDA model, say), which owns the KV pool and decided its size; of config,
  // the KV sizes (kv_cache_bytes, block_size, swap_space_bytes) are the executor's business.
  Engine(ModelExecutor& executor, const Tokenizer& tokenizer, const EngineConfig& config);

  Expected<RequestId> add_request(std::vector<int32_t> prompt, RequestParams params);
  // Finishes the request with reason abort and frees its blocks at once; false if unknown.
  bool abort(RequestId id);
  std::vector<RequestOutput> step();
  bool has_unfinished_requests() const { return scheduler_.has_work(); }
  EngineMetrics metrics() const;
  // The KV manager's invariants (every block's ref count equals the tables holding it, ...)
  // plus the engine's: every unfinished request's sequence is known to the KV manager unless
  // it waits, and no finished request holds blocks.
  Status check_invariants() const;
  int32_t max_model_len() const { return max_model_len_; }
  int32_t num_kv_blocks() const { return executor_.num_kv_blocks(); }

  // Runs the prompts as one continuous batch to completion (params.n must be 1).
  std::vector<Generation> generate(const std::vector<std::vector<int32_t>>& prompts,
                                   const RequestParams& params);

 private:
  // executor null: the owned one.
  Engine(std::unique_ptr<ModelExecutor> owned, ModelExecutor* executor, const Tokenizer& tokenizer,
         const EngineConfig& config);
  // Exactly one of logits (rows to sample on the host) and greedy (tokens the executor chose)
  // is non-empty when any chunk samples.
  void update(const SchedulerOutput& output, std::span<const float> logits,
              std::span<const GreedySample> greedy, std::vector<RequestOutput>& outputs);
  // Whether every sampling chunk of the step is one the executor's greedy sampling serves
  // exactly as the Sampler would (see ModelExecutor::forward_greedy).
  bool can_sample_on_device(const SchedulerOutput& output) const;
  // The general form (ModelExecutor::forward_sample): true when the executor can sample every
  // sampling chunk of the step, with sample_rows_ and the penalty lists filled for it.
  bool prepare_device_sampling(const SchedulerOutput& output);
  // The seed of a request's random stream on the executor: its own, else one drawn for it.
  uint64_t device_seed(const Request& request) const;
  bool check_stop(Request& request, int32_t token);
  void emit(Request& request, RequestOutput& out);
  void finish(Request& request, FinishReason reason);
  // After a request's first sample: n - 1 siblings share its prompt blocks (copy-on-write).
  void fork_siblings(Request& parent, std::span<const float> logits,
                     std::vector<RequestOutput>& outputs);
  RequestOutput sample_and_check(Request& request, std::span<const float> logits);
  RequestOutput take_sample(Request& request, const SampleResult& sample);
  void advance_beams(BeamGroup& group, std::vector<RequestOutput>& outputs);
  Request& fork_request(Request& parent);
  bool beam_group_done(const BeamGroup& group, const RequestParams& params) const;
  void finish_beam_group(RequestId id, BeamGroup& group, std::vector<RequestOutput>& outputs);

  std::unique_ptr<ModelExecutor> owned_executor_;  // the CPU path's; null for a given executor
  ModelExecutor& executor_;
  const Tokenizer& tokenizer_;
  int32_t max_model_len_;
  KvCacheManager kv_;
  Scheduler scheduler_;
  ModelRunner runner_;
  std::map<RequestId, std::unique_ptr<Request>> requests_;
  std::map<RequestId, BeamGroup> beam_groups_;
  RequestId next_id_ = 1;
  uint64_t next_arrival_ = 0;
  int64_t num_prompt_tokens_computed_ = 0;
  int64_t num_generated_tokens_ = 0;
  double execute_seconds_ = 0.0;
  double update_seconds_ = 0.0;
  int64_t num_steps_ = 0;
  int64_t num_device_sampled_steps_ = 0;
  // Executor sampling (forward_sample): drawn once; unseeded requests' seeds derive from it
  // and their ids. Per-step rows and penalty entries, and per-token scratch, reused.
  uint64_t random_base_ = 0;
  std::vector<RowSampleParams> sample_rows_;
  std::vector<int32_t> penalty_tokens_;
  std::vector<int32_t> penalty_counts_;
  std::vector<int32_t> token_counts_;  // (vocab) -1: unseen; zero between steps
  std::vector<int32_t> touched_;
};

}  // namespace folio
