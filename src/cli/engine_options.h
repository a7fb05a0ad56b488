// The engine's and the device's knobs as command-line options, shared by `folio run`, `serve`
// and `bench batch` (engine options, which include the device ones) and by `folio perplexity`
// and `bench` (the device ones alone), so that all spell and check them the same way.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/model_session.h"
#include "engine/engine.h"

namespace folio::cli {

// Where the model runs and how the device executes it.
struct DeviceOptions {
  std::string device = "cpu";
  // With cuda, the KV pool is what --gpu-memory-utilization leaves after weights and
  // activations, unless --kv-cache-memory is given.
  double gpu_memory_utilization = 0.9;
  bool no_cuda_graphs = false;
  // With cuda: pinned, split-K-free GEMM algorithms (tuned at start) instead of the faster
  // per-shape heuristic and GEMV; the CPU backend is batch invariant either way.
  bool batch_invariant = false;
  std::string kv_cache_dtype = "auto";  // --kv-cache-dtype (kv/kv_format.h)
  std::string quantization = "auto";    // --quantization: auto | none | fp8 (cuda: 4-bit kept / BF16 / FP8 W8A8)
  int32_t tensor_parallel_size = 1;     // --tensor-parallel-size: ranks the model is split over
  std::vector<int32_t> tensor_parallel_devices;  // --tensor-parallel-devices (cuda): each rank's GPU
};

// Speculative decoding (engine/spec/): a proposer, how many tokens it may propose per step, and
// whether the engine adapts that number to the load and the acceptance it measures.
struct SpeculativeOptions {
  std::string method;      // --speculative: "" (off, unless a model is given) | ngram | draft
  std::string model;       // --speculative-model FILE_OR_DIR (implies draft)
  int32_t num_tokens = 0;  // --num-speculative-tokens; 0: 4 when speculation is on
  int32_t ngram_min = 1;   // --ngram-min / --ngram-max: the n-gram lengths prompt lookup tries
  int32_t ngram_max = 4;
  bool fixed = false;  // --no-adaptive-speculation: always num_tokens

  bool enabled() const { return !method.empty() || !model.empty(); }
};

struct EngineOptions {
  std::string kv_cache_memory = "256M";
  int32_t block_size = 0;  // 0: the KV format's (kv_default_block_size)
  int32_t max_num_batched_tokens = 512;
  int32_t max_num_seqs = 64;
  bool no_prefix_cache = false;
  bool keep_window_blocks = false;     // --keep-window-blocks: no per-group tables (kv/kv_groups.h)
  bool no_kv_staging_overlay = false;  // --no-kv-staging-overlay (kv/block_pool.h)
  double swap_space_gib = 0.0;
  std::string preemption = "recompute";
  DeviceOptions device;
  SpeculativeOptions speculative;
  const CLI::Option* kv_cache_memory_option = nullptr;  // to tell a given size from the default
  // Not given: 512 tokens on the CPU, kCudaBatchedTokens with --device cuda (a GPU step of 512
  // tokens leaves the tensor cores mostly idle).
  const CLI::Option* max_num_batched_tokens_option = nullptr;
  // Not given: 64 on the CPU; with --device cuda what the KV pool holds (cuda_max_num_seqs).
  // A command that needs exactly max_num_seqs (bench verify's largest batch) sets it and
  // max_num_seqs_set.
  const CLI::Option* max_num_seqs_option = nullptr;
  bool max_num_seqs_set = false;
  bool max_num_seqs_given() const {
    return max_num_seqs_set || (max_num_seqs_option != nullptr && max_num_seqs_option->count() > 0);
  }
  // Not given: the whole step budget; with --device cuda kCudaPrefillTokensWhileDecoding.
  const CLI::Option* prefill_tokens_while_decoding_option = nullptr;
  int32_t prefill_tokens_while_decoding = 0;
  // SchedulerConfig::admission_reserve (floor: a seventh of it). Not given: 0, or with --device
  // cuda kCudaAdmissionReserve.
  const CLI::Option* admission_reserve_option = nullptr;
  double admission_reserve = 0.0;
  int32_t prefix_wait_tokens = 256;  // SchedulerConfig::min_deferred_prefix_tokens
};

inline constexpr int32_t kCudaBatchedTokens = 8192;
// A GPU engine runs up to this many requests at once unless its KV pool holds fewer
// sequences of kCudaPlannedSeqTokens tokens (an H200 with the Llama-3-8B shape in BF16 holds
// ~830k tokens: 1,024; a 70B INT4 model ~280k: 544). vLLM's default on 80 GB GPUs is 1,024.
inline constexpr int32_t kCudaMaxNumSeqs = 1024;
inline constexpr int32_t kCudaPlannedSeqTokens = 512;
// Prefill tokens a GPU step carries beside running decodes (chunked prefill's stall-free
// batching, Sarathi-Serve): a step of 8,192 prefill tokens takes ~200 ms on the 8B shape, and
// every running request's next token waits for it; 512 add about one decode step's time. (Also
// measured: 2 per decoding request when more, which lengthened steps at 768 decodes without
// shortening TTFT: docs/BENCHMARKS.md, "GPU serving defaults".)
inline constexpr int32_t kCudaPrefillTokensWhileDecoding = 512;
// Admission that keeps room for running requests' growth on the GPU (SGLang's initial
// new-token ratio): on an H100 at 1000 in / 1000 out x 768 (Llama-3-8B shape, fp16 KV) it cut
// preemptions from 197 to 81 and TPOT p50 from 37.4 to 35.0 ms at the same throughput
// (docs/BENCHMARKS.md, "Admission that keeps room to grow"). The CPU keeps 0: its small pools
// serve few requests, and preemption there is cheap to test.
inline constexpr double kCudaAdmissionReserve = 0.7;

// The GPU's max_num_seqs once its KV pool is sized: kCudaMaxNumSeqs, or fewer when the pool
// holds fewer sequences of kCudaPlannedSeqTokens, at least 16, rounded down to a decode-graph
// bucket (executor/decode_graph_buckets.h).
int32_t cuda_max_num_seqs(int64_t pool_token_slots);

inline constexpr int32_t kDefaultSpeculativeTokens = 4;

// --device, --gpu-memory-utilization, --no-cuda-graphs, --batch-invariant, --kv-cache-dtype,
// --quantization.
void add_device_options(CLI::App& cmd, DeviceOptions& options);
// The KV cache format --kv-cache-dtype names (validated when parsed).
KvFormat kv_format_of(const DeviceOptions& options);
// The device options and --kv-cache-memory, --block-size, --max-num-batched-tokens,
// --max-num-seqs, --no-prefix-cache, --swap-space, --preemption, and the speculative options
// (--speculative, --speculative-model, --num-speculative-tokens, --ngram-min, --ngram-max,
// --no-adaptive-speculation); bad values fail at parse time
// (usage, non-zero exit) rather than after the model has loaded.
void add_engine_options(CLI::App& cmd, EngineOptions& options);

// Errors for a device this build lacks (--device cuda without CUDA).
Status check_device(const DeviceOptions& options);
// max_model_len 0: the model's trained context. Errors for combinations no single option
// check can see (swap preemption without a swap pool, --device cuda in a build without CUDA).
Expected<EngineConfig> to_engine_config(const EngineOptions& options, int32_t max_model_len);
// The executor the engine options describe, for the engine config to_engine_config made.
ExecutorRequest to_executor_request(const EngineOptions& options, const EngineConfig& config);

}  // namespace folio::cli
