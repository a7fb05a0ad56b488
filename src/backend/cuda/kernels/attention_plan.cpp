#include "backend/cuda/kernels/attention_plan.h"

#include <algorithm>
#include <cassert>

namespace folio::cuda {
namespace {

size_t align_up(size_t bytes, size_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

}  // namespace

int32_t plan_decode_splits(int32_t num_seqs, int32_t num_kv_heads, int32_t max_context_len,
                           int32_t sm_count) {
  assert(num_seqs >= 0 && num_kv_heads > 0 && sm_count > 0);
  if (num_seqs == 0 || max_context_len <= 0) return 1;
  const int64_t base_ctas = static_cast<int64_t>(num_seqs) * num_kv_heads;
  const int64_t target_ctas = static_cast<int64_t>(kDecodeCtasPerSm) * sm_count;
  const int64_t wanted = (target_ctas + base_ctas - 1) / base_ctas;
  const int32_t tiles = (max_context_len + kDecodeTileTokens - 1) / kDecodeTileTokens;
  const int32_t most = std::clamp(tiles / kMinTilesPerSplit, 1, kMaxDecodeSplits);
  return static_cast<int32_t>(std::clamp<int64_t>(wanted, 1, most));
}

DecodeWorkspaceLayout decode_workspace_layout(int32_t num_seqs, int32_t num_heads,
                                              int32_t head_dim, int32_t num_splits) {
  DecodeWorkspaceLayout layout;
  const size_t partials = static_cast<size_t>(num_seqs) * num_heads * num_splits;
  layout.partial_out_offset = 0;
  layout.partial_stats_offset = align_up(partials * head_dim * sizeof(float), 256);
  layout.total_bytes = align_up(layout.partial_stats_offset + partials * 2 * sizeof(float), 256);
  return layout;
}

size_t attention_workspace_bytes(int32_t max_num_seqs, int32_t num_heads, int32_t num_kv_heads,
                                 int32_t head_dim, int32_t max_context_len, int32_t sm_count) {
  size_t most = 0;
  for (int32_t seqs = 1; seqs <= max_num_seqs; ++seqs) {
    const int32_t splits = plan_decode_splits(seqs, num_kv_heads, max_context_len, sm_count);
    if (splits == 1) continue;  // one split writes the output directly, no scratch
    most = std::max(most, decode_workspace_layout(seqs, num_heads, head_dim, splits).total_bytes);
  }
  return most;
}

}  // namespace folio::cuda
