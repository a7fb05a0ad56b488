// The CPU path as a ModelExecutor: a LlamaModel over a Backend, with its KV pool in host
// memory (KvCacheStorage) and an optional swap pool (HostKvPool).
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "engine/model_executor.h"
#include "kv/host_kv_pool.h"
#include "kv/kv_cache_storage.h"
#include "model/llama_model.h"

namespace folio {

class CpuModelExecutor final : public ModelExecutor {
 public:
  // num_blocks and num_host_blocks count the null block; num_host_blocks <= 1: no swap pool.
  CpuModelExecutor(LlamaModel& model, Backend& backend, int32_t num_blocks, int32_t block_size,
                   int32_t num_host_blocks);

  const ModelConfig& config() const override { return model_.config(); }
  int32_t block_size() const override { return storage_.shape().block_size; }
  int32_t num_kv_blocks() const override { return storage_.shape().num_blocks; }
  int32_t num_host_blocks() const override { return host_pool_ ? host_pool_->num_blocks() : 0; }
  void copy_blocks(std::span<const BlockCopy> copies) override;
  std::span<const float> forward(const ForwardBatch& batch) override;

  KvCacheStorage& storage() { return storage_; }

 private:
  LlamaModel& model_;
  Backend& backend_;
  KvCacheStorage storage_;
  std::unique_ptr<HostKvPool> host_pool_;
  std::vector<float> logits_;  // (logit rows, vocab)
};

}  // namespace folio
