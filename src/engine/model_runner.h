// Turns a SchedulerOutput into one forward pass: runs the KV manager's pending block copies,
// builds the flat varlen batch (tokens, positions, slot mapping, block tables) and returns the
// logits of the chunks that sample.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "engine/scheduler_output.h"
#include "kv/host_kv_pool.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_cache_storage.h"
#include "model/llama_model.h"

namespace folio {

class ModelRunner {
 public:
  ModelRunner(LlamaModel& model, Backend& backend, KvCacheManager& kv, KvCacheStorage& storage,
              HostKvPool* host_pool);

  // Logits (number of sampling chunks, vocab), in chunk order.
  const std::vector<float>& execute(const SchedulerOutput& output);

 private:
  LlamaModel& model_;
  Backend& backend_;
  KvCacheManager& kv_;
  KvCacheStorage& storage_;
  HostKvPool* host_pool_;
  ForwardBatch batch_;
  std::vector<float> logits_;
};

}  // namespace folio
