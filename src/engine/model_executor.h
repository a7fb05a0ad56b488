// What the engine needs from whatever runs the model: the KV pool's size, the block copies the
// KV manager decided (in their order), and one forward pass over a flat varlen batch. The CPU
// path (CpuModelExecutor) and the CUDA model (backend/cuda) implement it, so the same
// scheduler, KV manager and sampler drive both.
#pragma once

#include <cstdint>
#include <span>

#include "kv/block_copy.h"
#include "model/forward_batch.h"
#include "model/model_config.h"

namespace folio {

// A token the executor chose itself (greedy: argmax with ties to the lowest id, NaN never
// wins), with its raw logprob (log-softmax of the unpenalized logits).
struct GreedySample {
  int32_t token = -1;
  float logprob = 0.0f;
};

class ModelExecutor {
 public:
  virtual ~ModelExecutor() = default;

  virtual const ModelConfig& config() const = 0;
  virtual int32_t block_size() const = 0;
  // Device KV blocks, the reserved null block 0 included (= KvCacheConfig::num_blocks).
  virtual int32_t num_kv_blocks() const = 0;
  // Host swap blocks, null block included; 0 when there is no swap pool.
  virtual int32_t num_host_blocks() const = 0;

  // Performs copy-on-write, swap-out and swap-in copies in the order given, before the next
  // forward pass writes K/V (kv/block_copy.h says why the order matters).
  virtual void copy_blocks(std::span<const BlockCopy> copies) = 0;

  // Runs the batch, writing its K/V into the pool, and returns the logits of
  // batch.logit_rows: (logit_rows.size(), vocab) in host memory the executor owns (pinned for a
  // GPU), valid until the next forward.
  virtual std::span<const float> forward(const ForwardBatch& batch) = 0;

  // Optional: forward() followed by greedy sampling where the logits are, so that only the
  // chosen tokens come back (a GPU's vocab-wide rows stay on the device). The engine calls it
  // only when every sampling row is greedy without penalties, top logprobs or beams, which
  // is when the result equals the CPU Sampler's. One GreedySample per logit row, valid until
  // the next call; executors that return false from can_sample_greedy() never see a call.
  virtual bool can_sample_greedy() const { return false; }
  virtual std::span<const GreedySample> forward_greedy(const ForwardBatch& batch) {
    (void)batch;
    return {};
  }
};

}  // namespace folio
