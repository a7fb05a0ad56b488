// Runs one sequence through any Executor without the scheduler: the path behind
// `folio perplexity` and `folio bench` (pp/tg), on the CPU or the GPU alike. It still goes
// through the paged interface: the sequence owns a block table into the executor's KV pool
// (which nothing else may use meanwhile). With several block-table groups (sliding-window
// layers, kv/kv_groups.h) it holds one table per group and releases nothing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "executor/executor.h"

namespace folio {

class SequenceRunner {
 public:
  // Room for max_tokens tokens (at most what the executor's pool holds); prompts are fed at most
  // max_batch_tokens per forward pass (and at most the executor's logit rows when every
  // position's logits are asked for).
  SequenceRunner(Executor& executor, int32_t max_tokens, int32_t max_batch_tokens = 512);

  int32_t num_tokens() const { return num_tokens_; }
  int32_t capacity() const { return capacity_; }
  void reset() { num_tokens_ = 0; }

  // Appends tokens and returns the logits after the last one: (vocab,). With all_logits the
  // logits after every appended token: (tokens.size(), vocab).
  Expected<std::vector<float>> append(std::span<const int32_t> tokens, bool all_logits = false);

 private:
  Executor& executor_;
  int32_t max_batch_tokens_;
  int32_t max_logit_rows_;
  int32_t block_size_;
  int32_t num_groups_;
  int32_t num_staging_;  // residual formats' staging blocks per group (group g's from g * this), else 0
  int32_t capacity_;
  int32_t requested_tokens_;
  // (num_groups, capacity / block_size) pool blocks, never the null block, no two groups alike
  std::vector<std::vector<int32_t>> block_tables_;
  int32_t num_tokens_ = 0;
  ForwardBatch batch_;
  std::vector<std::vector<int32_t>> staging_;  // per group, the chunk's unsealed blocks' staging ids
};

}  // namespace folio
