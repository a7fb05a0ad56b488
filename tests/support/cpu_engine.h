// An engine over the CPU executor, kept together for tests (the executor owns the KV pool the
// engine's blocks live in, and must outlive it):
//
//   CpuEngine cpu(weights, backend, tokenizer, config, kv);
//   Engine& engine = cpu.engine;
#pragma once

#include <memory>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_executor.h"
#include "engine/engine.h"
#include "executor/kv_pool_sizing.h"
#include "model/model_weights.h"
#include "text/tokenizer.h"

namespace folio::testing {

struct CpuEngine {
  CpuEngine(const ModelWeights& weights, cpu::CpuBackend& backend, const Tokenizer& tokenizer,
            const EngineConfig& config = {}, const KvCacheOptions& kv = {}, Proposer* proposer = nullptr)
      : executor(weights, backend, kv), engine(executor, tokenizer, config, proposer) {}

  cpu::CpuExecutor executor;
  Engine engine;
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
