// The CPU as an Executor: the transformer recipe over the CPU backend's ops (cpu_forward.h), the
// paged KV pool in host memory (KvCacheStorage) and an optional swap pool (HostKvPool). It
// returns logits; the engine samples them on the host.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_forward.h"
#include "backend/cpu/prepared_weights.h"
#include "executor/executor.h"
#include "executor/kv_pool_sizing.h"
#include "kv/host_kv_pool.h"
#include "kv/kv_cache_storage.h"
#include "model/model_weights.h"

namespace folio::cpu {

class CpuExecutor final : public Executor {
 public:
  // num_blocks and num_host_blocks count the null block; num_host_blocks <= 1: no swap pool.
  // The weights and the backend must outlive the executor.
  // release_window_blocks: sliding-window layers get their own block tables (kv/kv_groups.h).
  // staging_overlay: the pool may lay block ids over idle staging blocks (kv/block_pool.h).
  CpuExecutor(const ModelWeights& weights, CpuBackend& backend, int32_t num_blocks, int32_t block_size,
              int32_t num_host_blocks, KvFormat format = KvFormat::kFp16, int32_t num_staging_blocks = 0,
              bool release_window_blocks = true, bool staging_overlay = true);
  // Pools sized from byte budgets (executor/kv_pool_sizing.h).
  CpuExecutor(const ModelWeights& weights, CpuBackend& backend, const KvCacheOptions& kv);

  const ModelConfig& config() const override { return weights_.config(); }
  KvPoolLayout kv_pool() const override;
  Capabilities capabilities() const override;
  StepResult execute(const ForwardBatch& batch, const SamplingPlan* plan) override;

  KvCacheStorage& storage() { return storage_; }
  // Every forward from now on adds its matrix inputs to stats (null: none); for `folio quantize`'s
  // importance matrix. stats must outlive its use.
  void set_activation_stats(ActivationStats* stats) { stats_ = stats; }
  // Makes this executor one rank of a tensor-parallel group (tensor_parallel_executor.h): its
  // weights are the rank's shard, and execute() returns the logits of its vocabulary slice.
  void set_tensor_parallel(const TensorParallelRank& tp) { tp_ = tp; }

 private:
  const ModelWeights& weights_;
  CpuBackend& backend_;
  PreparedWeights prepared_;  // the matrices as backend_ computes with them
  KvGroups groups_;           // before storage_: its shape has groups_.num_slots layers
  KvCacheStorage storage_;
  std::unique_ptr<HostKvPool> host_pool_;
  CpuActivations activations_;
  std::vector<float> logits_;  // (logit rows, vocab)
  ActivationStats* stats_ = nullptr;
  std::optional<TensorParallelRank> tp_;
  bool staging_overlay_ = true;
};

}  // namespace folio::cpu
