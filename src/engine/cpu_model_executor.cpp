#include "engine/cpu_model_executor.h"

namespace folio {

CpuModelExecutor::CpuModelExecutor(LlamaModel& model, Backend& backend, int32_t num_blocks,
                                   int32_t block_size, int32_t num_host_blocks)
    : model_(model),
      backend_(backend),
      storage_(model.kv_shape(num_blocks, block_size)),
      host_pool_(num_host_blocks > 1 ? std::make_unique<HostKvPool>(storage_.shape(), num_host_blocks)
                                     : nullptr) {}

void CpuModelExecutor::copy_blocks(std::span<const BlockCopy> copies) {
  execute_block_copies(copies, storage_, host_pool_.get());
}

std::span<const float> CpuModelExecutor::forward(const ForwardBatch& batch) {
  logits_.resize(batch.logit_rows.size() * static_cast<size_t>(model_.config().vocab_size));
  model_.forward(backend_, batch, storage_, logits_.data());
  return logits_;
}

}  // namespace folio
