#include "backend/cuda/kernels/attention_plan.h"

#include <algorithm>
#include <cassert>

namespace folio::cuda {
namespace {

size_t align_up(size_t bytes, size_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

}  // namespace

int32_t decode_grid_splits(int32_t max_context_len, DecodeSplitPolicy policy) {
  assert(policy.min_split_tokens > 0 && policy.min_split_tokens % kDecodeTileTokens == 0);
  assert(policy.max_splits >= 1);
  if (max_context_len <= 0) return 1;
  // Every context <= max_context_len has splits <= ceil(context / min_split_tokens) and
  // <= max_splits (decode_split_tokens is never below min_split_tokens).
  const int64_t by_tokens =
      (static_cast<int64_t>(max_context_len) + policy.min_split_tokens - 1) / policy.min_split_tokens;
  return static_cast<int32_t>(std::clamp<int64_t>(by_tokens, 1, policy.max_splits));
}

DecodeWalk decode_walk(int64_t rows, int32_t grid_splits, int64_t cta_slots, int32_t forced_ctas_per_row) {
  assert(grid_splits >= 1 && cta_slots >= 1);
  int32_t ctas = 1;
  if (forced_ctas_per_row > 0) {
    ctas = std::min(forced_ctas_per_row, grid_splits);
  } else if (rows > 0) {
    // Waves x splits a CTA, the makespan in units of one split when every CTA is alike.
    int64_t best = -1;
    for (int32_t c = 1; c <= grid_splits; ++c) {
      const int64_t waves = (rows * c + cta_slots - 1) / cta_slots;
      const int64_t cost = waves * ((grid_splits + c - 1) / c);
      if (best < 0 || cost < best) {
        best = cost;
        ctas = c;
      }
    }
  }
  DecodeWalk walk;
  walk.splits_per_cta = (grid_splits + ctas - 1) / ctas;
  walk.ctas_per_row = (grid_splits + walk.splits_per_cta - 1) / walk.splits_per_cta;  // no CTA without a split
  return walk;
}

DecodeWorkspaceLayout decode_workspace_layout(int32_t num_seqs, int32_t num_heads, int32_t head_dim,
                                              int32_t grid_splits) {
  DecodeWorkspaceLayout layout;
  const size_t partials = static_cast<size_t>(num_seqs) * num_heads * grid_splits;
  layout.partial_out_offset = 0;
  layout.partial_stats_offset = align_up(partials * head_dim * sizeof(float), 256);
  layout.total_bytes = align_up(layout.partial_stats_offset + partials * 2 * sizeof(float), 256);
  return layout;
}

size_t attention_workspace_bytes(int32_t max_num_seqs, int32_t num_heads, int32_t num_kv_heads, int32_t head_dim,
                                 int32_t max_context_len, int32_t sm_count) {
  assert(num_kv_heads > 0 && sm_count > 0);
  (void)num_kv_heads;
  (void)sm_count;
  const int32_t grid_splits = decode_grid_splits(max_context_len);
  if (grid_splits == 1 || max_num_seqs <= 0) return 0;  // one split writes the output directly
  return decode_workspace_layout(max_num_seqs, num_heads, head_dim, grid_splits).total_bytes;
}

}  // namespace folio::cuda
