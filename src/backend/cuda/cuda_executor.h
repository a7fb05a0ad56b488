// The CUDA path as a ModelExecutor, for the engine and the CLI (`--device cuda`). Plain C++:
// no CUDA header, so folio_lib's CLI includes it; the definition lives in folio_cuda, which
// is built only when FOLIO_HAS_CUDA is defined.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

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
  bool quiet = false;                    // no progress or summary on stderr
};

// What the executor did, for logs and benchmarks.
struct CudaExecutorStats {
  int64_t weight_bytes = 0;      // on the device, BF16
  int64_t activation_bytes = 0;
  int64_t kv_pool_bytes = 0;
  int64_t graph_replays = 0;
  int64_t eager_steps = 0;
  int32_t graphs_captured = 0;
  std::string device_name;
};

class CudaModelExecutor;

// Uploads the model's weights (dequantized to BF16) and sizes the KV pool. The LlamaModel (and
// its GgufFile) must outlive the executor only for the duration of this call.
Expected<std::unique_ptr<ModelExecutor>> make_cuda_executor(const LlamaModel& model,
                                                            const CudaExecutorOptions& options);

// The stats of an executor make_cuda_executor returned.
CudaExecutorStats cuda_executor_stats(const ModelExecutor& executor);

}  // namespace folio::cuda
