// What the engine needs from whatever runs the model: the KV pool's size, the block copies the
// KV manager decided (in their order), and one forward pass over a flat varlen batch. The CPU
// path (CpuModelExecutor) and the CUDA model (backend/cuda) implement it, so the same
// scheduler, KV manager and sampler drive both.
#pragma once

#include <cstdint>
#include <span>

#include "engine/sampling_params.h"
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

// One logit row's sampling settings for ModelExecutor::forward_sample: plain numbers, the
// Sampler's semantics (sampler.h), no device types. The engine fills them from the request.
struct RowSampleParams {
  float temperature = 1.0f;  // < SamplingParams::kGreedyTemperature: greedy
  int32_t top_k = -1;        // <= 0 or >= vocab: off
  float top_p = 1.0f;        // >= 1: off
  float min_p = 0.0f;        // <= 0: off
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  // The random stream: seed = the request's (or one drawn once for an unseeded request),
  // offset = the request's step (its number of output tokens so far), so a request's draws
  // depend on neither its row nor the rest of the batch.
  uint64_t seed = 0;
  uint64_t offset = 0;
  // This row's penalty entries are [penalty_begin, penalty_end) of SampleBatch's lists.
  int32_t penalty_begin = 0;
  int32_t penalty_end = 0;
};

// The sampling side of one forward_sample call: one RowSampleParams per logit row and the
// penalty entries of all rows. An entry is a token at most once per row: count > 0 is its
// number of occurrences in the output (repetition, frequency and presence penalties apply);
// count == 0 means it was seen only in the prompt (repetition penalty only).
struct SampleBatch {
  std::span<const RowSampleParams> rows;
  std::span<const int32_t> penalty_tokens;
  std::span<const int32_t> penalty_counts;
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

  // Optional, the general form: forward() followed by sampling every logit row where the
  // logits are, with its own temperature, top-k, top-p, min-p, penalties and random stream.
  // The engine calls it when can_sample(p) holds for every sampling row's params and no row
  // asks for top logprobs or beams. Tokens follow the Sampler's rules but not its random
  // numbers (the executor's generator is its own); the logprob of each chosen token is raw
  // (log-softmax of the unpenalized logits). One GreedySample per logit row, valid until the
  // next call. Preferred over forward_greedy when both apply.
  virtual bool can_sample(const SamplingParams& params) const {
    (void)params;
    return false;
  }
  virtual std::span<const GreedySample> forward_sample(const ForwardBatch& batch, const SampleBatch& sampling) {
    (void)batch;
    (void)sampling;
    return {};
  }
};

}  // namespace folio
