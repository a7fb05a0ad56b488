#include "engine/model_runner.h"

#include <algorithm>
#include <cassert>

namespace folio {

bool ModelRunner::rows_as_decodes(const SchedulerOutput& output) const {
  if (verify_rows_as_decodes_) return true;
  if (graph_decode_seqs_ == 0) return false;
  int32_t rows = 0;
  bool proposals = false;
  for (const ScheduledChunk& chunk : output.chunks) {
    if (chunk.num_new_tokens != 1 + chunk.num_draft_tokens) return false;  // a prefill chunk: eager anyway
    rows += chunk.num_new_tokens;
    proposals = proposals || chunk.num_draft_tokens > 0;
  }
  return proposals && rows <= graph_decode_seqs_;
}

namespace {

// One group's K/V of a chunk (kv/kv_groups.h): the slots its tokens write, the blocks they seal,
// and the chunk's attention sequence(s) over that group's table.
// The table's views point into the chunk (the scheduler's output), which outlives the batch.
struct GroupTableView {
  std::span<const int32_t> block_table;
  int32_t first_staged_block = 0;
  std::span<const int32_t> staging;
};

void add_chunk_kv(const ScheduledChunk& chunk, const GroupTableView& table, const SchedulerOutput& output,
                  int32_t query_start, bool split, std::vector<int32_t>& slot_mapping,
                  std::vector<AttentionSequence>& sequences, std::vector<KvSeal>& seals) {
  const int32_t block_size = output.block_size;
  const int32_t end = chunk.first_position + chunk.num_new_tokens;
  for (int32_t position = chunk.first_position; position < end; ++position) {
    const int32_t index = position / block_size;
    assert((!output.kv_residual || index >= table.first_staged_block) && "writing into a sealed block");
    // With a residual format new tokens go to their (unsealed) block's staging block.
    const int32_t block = output.kv_residual ? table.staging[static_cast<size_t>(index - table.first_staged_block)]
                                             : table.block_table[static_cast<size_t>(index)];
    slot_mapping.push_back(block * block_size + position % block_size);
  }
  if (output.kv_residual) {
    // Unsealed blocks this chunk fills are sealed in the pass.
    for (int32_t index = table.first_staged_block; index < end / block_size; ++index) {
      seals.push_back({table.block_table[static_cast<size_t>(index)],
                       table.staging[static_cast<size_t>(index - table.first_staged_block)]});
    }
  }
  if (split && chunk.num_draft_tokens > 0) {
    // Each row of the verification chunk (the last real token and the proposals; add_proposals
    // only extends one-token decode chunks) as its own one-token sequence over the context up
    // to itself: the blocks it reaches, and of those the unsealed ones' staging blocks.
    for (int32_t position = chunk.first_position; position < end; ++position) {
      const int32_t blocks = position / block_size + 1;
      const int32_t first_staged = std::min(table.first_staged_block, blocks);
      const std::span<const int32_t> staging =
          table.staging.first(output.kv_residual ? static_cast<size_t>(blocks - first_staged) : 0);
      sequences.push_back({query_start + position - chunk.first_position, 1, position + 1,
                           table.block_table.first(static_cast<size_t>(blocks)), first_staged, staging});
    }
  } else {
    sequences.push_back(
        {query_start, chunk.num_new_tokens, end, table.block_table, table.first_staged_block, table.staging});
  }
}

}  // namespace

void ModelRunner::prepare(const SchedulerOutput& output) {
  batch_.clear();
  batch_.block_copies = output.block_copies;
  const bool split = rows_as_decodes(output);
  const size_t more_groups = output.chunks.empty() ? 0 : output.chunks.front().more_groups.size();
  batch_.more_kv_groups.resize(more_groups);
  for (const ScheduledChunk& chunk : output.chunks) {
    const Request& request = *chunk.request;
    const int32_t query_start = batch_.num_tokens();
    const int32_t end = chunk.first_position + chunk.num_new_tokens;
    for (int32_t position = chunk.first_position; position < end; ++position) {
      // Past the request's last token come its proposals (speculative decoding).
      const int32_t past = position - request.num_tokens();
      batch_.tokens.push_back(past < 0 ? request.tokens[static_cast<size_t>(position)]
                                       : request.speculation.draft_tokens[static_cast<size_t>(past)]);
      batch_.positions.push_back(position);
    }
    add_chunk_kv(chunk, {chunk.block_table, chunk.first_staged_block, chunk.staging}, output, query_start, split,
                 batch_.slot_mapping, batch_.sequences, batch_.seals);
    assert(chunk.more_groups.size() == more_groups);
    for (size_t g = 0; g < more_groups; ++g) {
      KvGroupInputs& inputs = batch_.more_kv_groups[g];
      const ChunkGroupTable& table = chunk.more_groups[g];
      add_chunk_kv(chunk, {table.block_table, table.first_staged_block, table.staging}, output, query_start, split,
                   inputs.slot_mapping, inputs.sequences, inputs.seals);
    }
    // A chunk with proposals wants every row from its last real token on: row j verifies
    // proposal j, the last row gives the token after the proposals.
    if (chunk.samples) {
      for (int32_t row = batch_.num_tokens() - 1 - chunk.num_draft_tokens; row < batch_.num_tokens(); ++row) {
        batch_.logit_rows.push_back(row);
      }
    }
  }
}

StepResult ModelRunner::execute(const SchedulerOutput& output, const SamplingPlan* plan) {
  prepare(output);
  return executor_.execute(batch_, plan);
}

}  // namespace folio
