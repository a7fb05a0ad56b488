#include "engine/model_runner.h"

namespace folio {

void ModelRunner::prepare(const SchedulerOutput& output) {
  batch_.clear();
  batch_.block_copies = output.block_copies;
  const int32_t block_size = output.block_size;
  for (const ScheduledChunk& chunk : output.chunks) {
    const Request& request = *chunk.request;
    const int32_t query_start = batch_.num_tokens();
    for (int32_t i = 0; i < chunk.num_new_tokens; ++i) {
      const int32_t position = chunk.first_position + i;
      batch_.tokens.push_back(request.tokens[static_cast<size_t>(position)]);
      batch_.positions.push_back(position);
      batch_.slot_mapping.push_back(chunk.block_table[static_cast<size_t>(position / block_size)] * block_size +
                                    position % block_size);
    }
    batch_.sequences.push_back(
        {query_start, chunk.num_new_tokens, chunk.first_position + chunk.num_new_tokens, chunk.block_table});
    if (chunk.samples) batch_.logit_rows.push_back(batch_.num_tokens() - 1);
  }
}

StepResult ModelRunner::execute(const SchedulerOutput& output, const SamplingPlan* plan) {
  prepare(output);
  return executor_.execute(batch_, plan);
}

}  // namespace folio
