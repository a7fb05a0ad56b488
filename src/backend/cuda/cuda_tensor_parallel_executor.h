// Tensor parallelism on GPUs (`--device cuda --tensor-parallel-size N`): N ranks, each a
// CudaExecutor over its shard of the weights (model/tensor_parallel_plan.h: heads, FFN width
// and vocabulary split Megatron-style) with its own KV pool holding its KV heads of every
// block, joined by DeviceCollectives. The engine sees one executor: one scheduler, one KV
// manager and one set of block tables, the same on every rank; every rank samples the same
// gathered logits alike and rank 0's tokens are returned.
//
// One process, one host thread per rank: the ranks need no launcher or rendezvous, a step is one
// call into every rank at once, and NCCL's communicators for all GPUs come from one
// ncclCommInitAll. Two kinds of placement:
//  - one GPU per rank (devices all distinct): NCCL, decode graphs capture the collectives;
//  - every rank on one GPU (devices all the same): SameDeviceCollectives, eager steps. No
//    speed-up; it runs the sharded path where one GPU is lent, for checks against TP = 1.
// Each rank's pool has the same number of blocks: the smallest any rank can afford with its
// share of its GPU's memory (ranks on one GPU split it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_executor.h"
#include "backend/cuda/device_collectives.h"
#include "backend/cuda/device_rank.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "executor/executor.h"
#include "model/model_weights.h"

namespace folio::cuda {

class CudaTensorParallelExecutor final : public Executor {
 public:
  // devices: the GPU of each rank (its size is the rank count). options.device is ignored;
  // kv_cache_bytes and swap_space_bytes, if given, are the whole model's (all ranks together),
  // as on the CPU. The weights must outlive this call only.
  static Expected<std::unique_ptr<CudaTensorParallelExecutor>> create(const ModelWeights& weights,
                                                                      const std::vector<int32_t>& devices,
                                                                      const CudaExecutorOptions& options);
  ~CudaTensorParallelExecutor() override;

  const ModelConfig& config() const override { return config_; }
  KvPoolLayout kv_pool() const override;
  Capabilities capabilities() const override;
  StepResult execute(const ForwardBatch& batch, const SamplingPlan* plan) override;

  int32_t num_ranks() const { return static_cast<int32_t>(ranks_.size()); }
  CudaExecutor& rank_executor(int32_t rank) { return *ranks_[static_cast<size_t>(rank)].executor; }
  const RankShard& shard(int32_t rank) const { return ranks_[static_cast<size_t>(rank)].place.shard(); }
  // "NCCL 2.28.9" or "one GPU".
  const std::string& collectives_name() const { return collectives_name_; }

 private:
  struct Rank {
    int32_t device = 0;
    DeviceRank place;
    std::unique_ptr<CudaExecutor> executor;
    StepResult result;
  };
  CudaTensorParallelExecutor(const ModelConfig& config, int32_t num_ranks);

  ModelConfig config_;
  std::unique_ptr<DeviceCollectives> collectives_;  // outlives the ranks' executors
  std::vector<Rank> ranks_;                         // sized once: the executors point into it
  ThreadPool rank_threads_;                         // one thread per rank (the caller is rank 0)
  std::string collectives_name_;
};

}  // namespace folio::cuda
