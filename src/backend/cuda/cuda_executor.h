// The CUDA path as a ModelExecutor, for the engine and the CLI (`--device cuda`). Plain C++:
// no CUDA header, so folio_lib's CLI includes it; the definition lives in folio_cuda, which
// is built only when FOLIO_HAS_CUDA is defined.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "backend/cuda/gemm_policy.h"
#include "core/status.h"
#include "engine/model_executor.h"
#include "model/llama_model.h"

namespace folio::cuda {

struct CudaExecutorOptions {
  int32_t device = 0;
  // Fraction of the GPU's total memory folio may use: weights, activations, then as many KV
  // blocks as fit in the rest.
  double gpu_memory_utilization = 0.9;
  int64_t kv_cache_bytes = 0;        // > 0: exactly this KV pool instead (tests: a 24-block pool)
  int32_t block_size = 16;
  int64_t swap_space_bytes = 0;      // pinned host pool for preemption by swap
  int32_t max_num_batched_tokens = 512;  // activations are sized for this many tokens
  int32_t max_num_seqs = 64;             // decode graphs are captured up to this batch
  int32_t max_model_len = 0;             // 0: the model's trained context
  bool cuda_graphs = true;               // decode-only steps replay captured graphs
  // Fast by default (cuBLASLt's heuristic per shape, GEMV at n <= 8); gemm.batch_invariant
  // (`--batch-invariant`): a row's result does not depend on what else is in the batch, with
  // algorithms tuned at start (gemm_policy.h, cublaslt_gemm.h).
  GemmPolicy gemm;
  bool device_sampling = true;           // rows are sampled on the GPU (forward_sample / forward_greedy)
  bool quiet = false;                    // no progress or summary on stderr
};

// What the executor did, for logs and benchmarks.
struct CudaExecutorStats {
  int64_t weight_bytes = 0;      // on the device, BF16
  int64_t activation_bytes = 0;
  int64_t kv_pool_bytes = 0;
  int64_t graph_replays = 0;
  int64_t eager_steps = 0;         // = prefill + mixed + eager decode steps
  int64_t prefill_steps = 0;       // eager, every sequence has more than one new token
  int64_t mixed_steps = 0;         // eager, prefill chunks and decode tokens together
  int64_t eager_decode_steps = 0;  // decode-only steps that did not fit a graph
  int64_t device_sampled_steps = 0;
  int32_t graphs_captured = 0;
  int32_t gemm_pinned_fallbacks = 0;  // shapes where the pinned algorithm was refused
  // Time, summed over steps. GPU times come from events around the work on the stream.
  double upload_host_s = 0.0;      // packing the batch on the host and queueing its copy
  double wait_host_s = 0.0;        // blocked in the end-of-step synchronization
  double layers_gpu_s = 0.0;       // forward over the layers (+ lm_head inside a decode graph)
  double head_gpu_s = 0.0;         // the rest: eager lm_head, then GPU sampling or logits D2H
  double capture_s = 0.0;          // capturing decode graphs (host clock, warm-up run included)
  int64_t logits_bytes_to_host = 0;
  std::string device_name;
};

class CudaModelExecutor;

// Uploads the model's weights (dequantized to BF16) and sizes the KV pool. The LlamaModel (and
// its GgufFile) must outlive the executor only for the duration of this call.
Expected<std::unique_ptr<ModelExecutor>> make_cuda_executor(const LlamaModel& model,
                                                            const CudaExecutorOptions& options);

// The stats of an executor make_cuda_executor returned.
CudaExecutorStats cuda_executor_stats(const ModelExecutor& executor);
// Zeroes the step counters and times of stats (benchmarks measure one phase at a time).
void reset_cuda_executor_stats(ModelExecutor& executor);

// Switches the GEMM policy (CudaExecutorOptions::gemm) and drops the captured graphs, which
// hold the old kernels. For benchmarks and checks comparing policies. A tuned invariant policy
// without a pinned list reuses the executor's earlier tuning, if any, else tunes.
void set_cuda_gemm_policy(ModelExecutor& executor, const GemmPolicy& policy);
// The executor's policy; with tuned pinning, .pinned lists the tuned algorithms, so that
// another executor given this policy computes the same bits.
GemmPolicy cuda_gemm_policy(const ModelExecutor& executor);
// The pinned GEMM algorithms, one line per weight shape (empty before the first forward).
std::string cuda_gemm_description(ModelExecutor& executor);

}  // namespace folio::cuda
