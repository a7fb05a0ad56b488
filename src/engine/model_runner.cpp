#include "engine/model_runner.h"

namespace folio {

ModelRunner::ModelRunner(ModelExecutor& executor, KvCacheManager& kv)
    : executor_(executor), kv_(kv) {}

bool ModelRunner::prepare(const SchedulerOutput& output) {
  // Copies first, in the order they were decided: a later decision may reuse a block an
  // earlier one emptied.
  const std::vector<BlockCopy> copies = kv_.take_pending_copies();
  if (!copies.empty()) executor_.copy_blocks(copies);

  batch_.tokens.clear();
  batch_.positions.clear();
  batch_.slot_mapping.clear();
  batch_.sequences.clear();
  batch_.logit_rows.clear();
  for (const ScheduledChunk& chunk : output.chunks) {
    const Request& request = *chunk.request;
    const int32_t query_start = batch_.num_tokens();
    for (int32_t i = 0; i < chunk.num_new_tokens; ++i) {
      batch_.tokens.push_back(request.token_at(chunk.first_position + i));
      batch_.positions.push_back(chunk.first_position + i);
    }
    kv_.append_slot_mapping(request.sequence_id(), chunk.first_position, chunk.num_new_tokens,
                            batch_.slot_mapping);
    batch_.sequences.push_back({query_start, chunk.num_new_tokens,
                                chunk.first_position + chunk.num_new_tokens,
                                kv_.block_table(request.sequence_id())});
    if (chunk.samples) batch_.logit_rows.push_back(batch_.num_tokens() - 1);
  }
  return !batch_.tokens.empty();
}

std::span<const float> ModelRunner::execute(const SchedulerOutput& output) {
  if (!prepare(output)) return {};
  return executor_.forward(batch_);
}

std::span<const GreedySample> ModelRunner::execute_greedy(const SchedulerOutput& output) {
  if (!prepare(output)) return {};
  return executor_.forward_greedy(batch_);
}

std::span<const GreedySample> ModelRunner::execute_sample(const SchedulerOutput& output,
                                                          const SampleBatch& sampling) {
  if (!prepare(output)) return {};
  return executor_.forward_sample(batch_, sampling);
}

}  // namespace folio
