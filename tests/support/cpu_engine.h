// An engine over the CPU executor, kept together for tests (the executor owns the KV pool the
// engine's blocks live in, and must outlive it):
//
//   CpuEngine cpu(weights, backend, tokenizer, config, kv);
//   Engine& engine = cpu.engine;
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_executor.h"
#include "backend/cpu/tensor_parallel_executor.h"
#include "engine/engine.h"
#include "executor/kv_pool_sizing.h"
#include "model/model_weights.h"
#include "text/tokenizer.h"

namespace folio::testing {

struct CpuEngine {
  // tensor_parallel > 1: the engine runs over that many in-process ranks (one thread each, the
  // backend's ISA) instead of `executor`, which is then idle.
  CpuEngine(const ModelWeights& weights, cpu::CpuBackend& backend, const Tokenizer& tokenizer,
            const EngineConfig& config = {}, const KvCacheOptions& kv = {}, Proposer* proposer = nullptr,
            int32_t tensor_parallel = 1)
      : executor(weights, backend, kv),
        tp(tensor_parallel > 1 ? make_tp(weights, backend, kv, tensor_parallel) : nullptr),
        engine(tp ? static_cast<Executor&>(*tp) : executor, tokenizer, config, proposer) {}

  cpu::CpuExecutor executor;
  std::unique_ptr<cpu::TensorParallelExecutor> tp;
  Engine engine;

 private:
  static std::unique_ptr<cpu::TensorParallelExecutor> make_tp(const ModelWeights& weights, cpu::CpuBackend& backend,
                                                              const KvCacheOptions& kv, int32_t ranks) {
    Expected<std::unique_ptr<cpu::TensorParallelExecutor>> tp =
        cpu::TensorParallelExecutor::create(weights, ranks, ranks, kv, backend.isa());
    EXPECT_TRUE(tp) << tp.error();
    return tp ? std::move(tp).value() : nullptr;
  }
};

// A CPU executor whose pool holds one sequence of max_tokens tokens: what a SequenceRunner needs.
inline std::unique_ptr<cpu::CpuExecutor> sequence_executor(const ModelWeights& weights, cpu::CpuBackend& backend,
                                                           int32_t max_tokens, int32_t block_size = 16) {
  // A table per block-table group (sliding-window layers), each covering the whole sequence.
  const int32_t groups = kv_groups_of(weights.config()).num_groups();
  return std::make_unique<cpu::CpuExecutor>(weights, backend, (max_tokens + block_size - 1) / block_size * groups + 1,
                                            block_size, 0);
}

// Bytes of one KV block of the model at this block size, for pools sized in blocks.
inline int64_t block_bytes(const ModelWeights& weights, int32_t block_size = 16) {
  return kv_bytes_per_block(weights.config(), block_size);
}

}  // namespace folio::testing
