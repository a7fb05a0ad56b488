// The one interface between the engine and a device: the model's shape, the KV pool the executor
// allocated, what the device can do, and one call per engine step. The CPU executor lives beside
// the CPU backend (backend/cpu/cpu_executor.h), the CUDA one beside CUDA
// (backend/cuda/cuda_executor.h); the engine, `folio perplexity` and `folio bench` drive either
// through this header alone.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "executor/forward_batch.h"
#include "executor/sampling_plan.h"
#include "kv/kv_format.h"
#include "model/model_config.h"

namespace folio {

// The paged KV pool as the executor sized it. The KV manager's blocks are these blocks.
struct KvPoolLayout {
  int32_t num_blocks = 0;       // device blocks, the reserved null block 0 included
  int32_t block_size = 16;      // tokens per block
  int32_t num_host_blocks = 0;  // host swap blocks, null block included; 0: no swap pool
  int64_t bytes_per_block = 0;  // K and V of every layer, in the pool's format
  KvFormat format = KvFormat::kFp16;
  int32_t num_staging_blocks = 0;       // residual formats (kv_format.h): device staging blocks
  int32_t num_host_staging_blocks = 0;  // and host ones for swapped sequences
  // Block ids num_blocks .. num_blocks + num_overlay_blocks - 1 lie in the staging blocks' bytes
  // (a layer is [blocks][staging blocks]; docs/design/kv-staging-overlay.md): the pool hands them
  // out when no lent staging block overlaps them.
  int32_t num_overlay_blocks = 0;
  int64_t bytes_per_staging_block = 0;  // fp16 K and V of every layer
  // One window per block-table group (kv_groups.h; 0: the whole context); empty: one group.
  std::vector<int32_t> group_windows{};

  // Slots in plain blocks: what one sequence can always count on.
  int64_t num_token_slots() const { return static_cast<int64_t>(num_blocks - 1) * block_size; }
  // Slots in every id, overlay ids included: what the pool holds while no staging block is lent.
  int64_t num_pool_token_slots() const {
    return static_cast<int64_t>(num_blocks - 1 + num_overlay_blocks) * block_size;
  }
};

// What the device can do, asked once by whoever drives it (instead of asking its type).
struct Capabilities {
  std::string device;  // "cpu (avx512, 8 threads)", "cuda (NVIDIA H200, 132 SMs)"
  // execute() accepts a SamplingPlan and then returns tokens chosen where the logits are (a
  // GPU's vocabulary-wide rows never cross to the host).
  bool samples_on_device = false;
  // A row's result does not depend on what else is in the batch.
  bool batch_invariant = true;
  // Speculative verification rows are sent as single-token sequences, each attending as a
  // decode would: a device whose multi-token attention kernel rounds differently from its decode
  // kernel then verifies with plain decoding's numbers (greedy tokens equal with speculation on).
  bool verify_rows_as_decodes = false;
  // The most one-token sequences a step may hold and still replay a captured graph (0: no
  // graphs). A step of decodes and verification chunks only, whose rows sent as decodes number
  // no more than this, is sent so: one graph launch instead of an eager pass's hundreds.
  int32_t graph_decode_seqs = 0;
  // Most tokens and logit rows one execute() takes; callers split larger work.
  int32_t max_batch_tokens = 1 << 30;
  int32_t max_logit_rows = 1 << 30;
};

// A token the executor chose itself, with its raw logprob (log-softmax of the unpenalized
// logits).
struct SampledToken {
  int32_t token = -1;
  float logprob = 0.0f;
};

// Exactly one of the two is filled for a batch with logit rows: tokens when execute() was given
// a SamplingPlan, logits otherwise. Valid until the next execute().
struct StepResult {
  std::span<const float> logits;         // (logit_rows, vocab) in host memory
  std::span<const SampledToken> tokens;  // (logit_rows,)
};

class Executor {
 public:
  virtual ~Executor() = default;

  virtual const ModelConfig& config() const = 0;
  virtual KvPoolLayout kv_pool() const = 0;
  virtual Capabilities capabilities() const = 0;

  // Runs batch.block_copies in order, then the tokens through every layer, writing their K/V
  // into the pool, and returns the logit rows' logits, or, given a plan (only when
  // capabilities().samples_on_device), one token per logit row sampled by plan->rows.
  virtual StepResult execute(const ForwardBatch& batch, const SamplingPlan* plan) = 0;
};

}  // namespace folio
