#include "cli/host_only_executor.h"

#include "core/splitmix64.h"
#include "executor/forward_batch.h"
#include "executor/kv_pool_sizing.h"
#include "executor/sampling_plan.h"

namespace folio::cli {

HostOnlyExecutor::HostOnlyExecutor(const ModelConfig& config, int32_t num_blocks, int32_t block_size)
    : config_(config) {
  layout_.num_blocks = num_blocks;
  layout_.block_size = block_size;
  layout_.bytes_per_block = kv_bytes_per_block(config, block_size);
  const KvGroups groups = kv_groups_of(config);
  if (groups.windows != std::vector<int32_t>{0}) layout_.group_windows = groups.windows;
}

Capabilities HostOnlyExecutor::capabilities() const {
  Capabilities caps;
  caps.device = "host only (no model: the engine's own cost)";
  caps.samples_on_device = true;
  caps.batch_invariant = true;
  return caps;
}

StepResult HostOnlyExecutor::execute(const ForwardBatch& batch, const SamplingPlan* plan) {
  block_copies_ += static_cast<int64_t>(batch.block_copies.size());
  last_tokens_ = batch.num_tokens();
  last_logit_rows_ = static_cast<int32_t>(batch.logit_rows.size());
  if (batch.logit_rows.empty()) return {};
  const uint64_t vocab = static_cast<uint64_t>(config_.vocab_size);
  if (plan == nullptr) {
    logits_.assign(batch.logit_rows.size() * vocab, 0.0f);
    return {logits_, {}};
  }
  tokens_.resize(batch.logit_rows.size());
  for (SampledToken& t : tokens_) t = {static_cast<int32_t>(splitmix64(drawn_++) % vocab), 0.0f};
  return {{}, tokens_};
}

}  // namespace folio::cli
