// Tensor parallelism on the CPU: N ranks as threads of one process, each a CpuExecutor over its
// shard of the weights (model/tensor_parallel_plan.h) with its own backend, thread pool and KV
// pool (its KV heads of every block), joined by an in-memory all-reduce. The engine sees one
// executor: one scheduler, one KV manager and one set of block tables, the same on every rank;
// the ranks' vocabulary slices of the logits are stitched into whole rows, which the engine
// samples once.
//
// Threads rather than processes because CPU ranks share one memory: a rank reads its shard
// straight from the mapped file (row slices are views; column slices are the only copies) and
// the all-reduce is a sum over buffers every thread can see. The same plan and the same hooks
// (CpuForward's all-reduce after the attention output and after the MLP) are what a multi-GPU
// executor runs with NCCL; here they let CI check the sharding math: TP=N against TP=1.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_executor.h"
#include "backend/cpu/in_process_all_reduce.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "executor/executor.h"
#include "executor/kv_pool_sizing.h"
#include "model/model_weights.h"
#include "model/tensor_parallel_plan.h"

namespace folio::cpu {

class TensorParallelExecutor final : public Executor {
 public:
  // num_threads: all ranks' together (each rank gets an equal share, at least one); the pools
  // are sized from kv's budgets for all ranks together. The weights must outlive the executor.
  static Expected<std::unique_ptr<TensorParallelExecutor>> create(
      const ModelWeights& weights, int32_t num_ranks, int num_threads, const KvCacheOptions& kv, Isa isa = detect_isa(),
      ActivationPrecision precision = ActivationPrecision::kQuantized);

  const ModelConfig& config() const override { return weights_.config(); }
  KvPoolLayout kv_pool() const override;
  Capabilities capabilities() const override;
  StepResult execute(const ForwardBatch& batch, const SamplingPlan* plan) override;

  int32_t num_ranks() const { return static_cast<int32_t>(ranks_.size()); }
  const RankShard& shard(int32_t rank) const { return ranks_[static_cast<size_t>(rank)].shard; }

 private:
  struct Rank {
    RankShard shard;
    std::unique_ptr<ModelWeights> weights;
    std::unique_ptr<CpuBackend> backend;
    std::unique_ptr<CpuExecutor> executor;
    StepResult result;
  };
  TensorParallelExecutor(const ModelWeights& weights, int32_t num_ranks);

  const ModelWeights& weights_;
  InProcessAllReduce all_reduce_;
  ThreadPool rank_threads_;  // one thread per rank (the caller is rank 0)
  std::vector<Rank> ranks_;
  std::vector<float> logits_;  // (logit rows, vocab)
};

}  // namespace folio::cpu
