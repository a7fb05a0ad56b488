#include "backend/cpu/cpu_executor.h"

#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace folio::cpu {

namespace {

// Residual formats take their staging blocks out of each budget first.
int64_t budget_after_staging(int64_t budget, const ModelConfig& config, const KvCacheOptions& kv) {
  const int64_t staging_bytes =
      static_cast<int64_t>(kv_staging_blocks(kv, config)) *
      static_cast<int64_t>(
          kv_cache_shape(config, 1, kv.block_size, kv.format, 0, kv.release_window_blocks).bytes_per_staging_block());
  return budget - staging_bytes;
}

}  // namespace

CpuExecutor::CpuExecutor(const ModelWeights& weights, CpuBackend& backend, int32_t num_blocks, int32_t block_size,
                         int32_t num_host_blocks, KvFormat format, int32_t num_staging_blocks,
                         bool release_window_blocks, bool staging_overlay)
    : weights_(weights),
      backend_(backend),
      prepared_(weights, backend),
      groups_(kv_groups_of(weights.config(), release_window_blocks)),
      storage_(kv_cache_shape(weights.config(), num_blocks, block_size, format,
                              !kv_format_has_residual(format) ? 0
                              : num_staging_blocks > 0
                                  ? num_staging_blocks
                                  : kv_staging_blocks_for(64, 512, block_size) *
                                        kv_groups_of(weights.config(), release_window_blocks).num_groups(),
                              release_window_blocks)),
      host_pool_(num_host_blocks > 1 ? std::make_unique<HostKvPool>(storage_.shape(), num_host_blocks,
                                                                    storage_.shape().num_staging_blocks)
                                     : nullptr),
      staging_overlay_(staging_overlay) {
  // Callers check the shape first (the CLI reports it as an error); a KIVI block shorter than its
  // 32-token key group would hold no keys at all, and silently wrong attention is worse than this.
  if (const std::string error = kv_format_shape_error(format, block_size, weights.config().head_dim); !error.empty()) {
    std::fprintf(stderr, "CpuExecutor: %s\n", error.c_str());
    std::abort();
  }
}

CpuExecutor::CpuExecutor(const ModelWeights& weights, CpuBackend& backend, const KvCacheOptions& kv)
    : CpuExecutor(weights, backend,
                  std::max(1, kv_blocks_for_budget(budget_after_staging(kv.kv_cache_bytes, weights.config(), kv),
                                                   kv_bytes_per_block(weights.config(), kv.block_size, kv.format,
                                                                      kv.release_window_blocks))),
                  kv.block_size,
                  kv_blocks_for_budget(
                      budget_after_staging(kv.swap_space_bytes, weights.config(), kv),
                      kv_bytes_per_block(weights.config(), kv.block_size, kv.format, kv.release_window_blocks)),
                  kv.format, kv_staging_blocks(kv, weights.config()), kv.release_window_blocks, kv.staging_overlay) {}

KvPoolLayout CpuExecutor::kv_pool() const {
  const KvCacheShape& shape = storage_.shape();
  KvPoolLayout layout{shape.num_blocks, shape.block_size, host_pool_ ? host_pool_->num_blocks() : 0,
                      static_cast<int64_t>(shape.bytes_per_block()), shape.format};
  layout.num_staging_blocks = shape.num_staging_blocks;
  layout.num_host_staging_blocks = host_pool_ ? host_pool_->num_staging() : 0;
  if (staging_overlay_) layout.num_overlay_blocks = shape.num_overlay_blocks();
  layout.bytes_per_staging_block = static_cast<int64_t>(shape.bytes_per_staging_block());
  if (groups_.windows != std::vector<int32_t>{0}) layout.group_windows = groups_.windows;
  return layout;
}

Capabilities CpuExecutor::capabilities() const {
  Capabilities caps;
  caps.device =
      "cpu (" + std::string(isa_name(backend_.isa())) + ", " + std::to_string(backend_.num_threads()) + " threads)";
  caps.samples_on_device = false;
  caps.batch_invariant = true;  // every row's matmuls and attention are computed on their own
  return caps;
}

StepResult CpuExecutor::execute(const ForwardBatch& batch, const SamplingPlan* plan) {
  assert(plan == nullptr && "the CPU executor returns logits; the engine samples them");
  (void)plan;
  execute_block_copies(batch.block_copies, storage_, host_pool_.get());
  if (batch.tokens.empty()) return {};
  const size_t vocab = static_cast<size_t>(weights_.config().vocab_size);
  const int32_t rows = static_cast<int32_t>(batch.logit_rows.size());
  logits_.resize(static_cast<size_t>(rows) * vocab);
  CpuForward forward(weights_, backend_, storage_, batch, activations_, logits_.data(), stats_, &groups_, &prepared_,
                     tp_ ? &*tp_ : nullptr);
  run_transformer_layers(weights_.architecture(), forward);
  if (rows > 0) run_transformer_head(forward, 0, rows);
  return StepResult{logits_, {}};
}

}  // namespace folio::cpu
