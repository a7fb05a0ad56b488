// Turns a SchedulerOutput into one forward pass: runs the KV manager's pending block copies,
// builds the flat varlen batch (tokens, positions, slot mapping, block tables) and returns the
// logits of the chunks that sample.
#pragma once

#include <span>

#include "engine/model_executor.h"
#include "engine/scheduler_output.h"
#include "kv/kv_cache_manager.h"

namespace folio {

class ModelRunner {
 public:
  ModelRunner(ModelExecutor& executor, KvCacheManager& kv);

  // Logits (number of sampling chunks, vocab), in chunk order; valid until the next call.
  std::span<const float> execute(const SchedulerOutput& output);
  // Same batch, greedy tokens chosen by the executor (ModelExecutor::forward_greedy).
  std::span<const GreedySample> execute_greedy(const SchedulerOutput& output);
  // Same batch, tokens sampled by the executor (ModelExecutor::forward_sample); sampling holds
  // one row per sampling chunk, in chunk order.
  std::span<const GreedySample> execute_sample(const SchedulerOutput& output, const SampleBatch& sampling);

 private:
  // Runs the block copies and fills batch_; false when there is nothing to run.
  bool prepare(const SchedulerOutput& output);

  ModelExecutor& executor_;
  KvCacheManager& kv_;
  ForwardBatch batch_;
};

}  // namespace folio
