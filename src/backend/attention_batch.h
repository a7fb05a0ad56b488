// The plain views attention kernels take: a varlen batch of query tokens from many sequences
// (each sequence's slice is executor/forward_batch.h's AttentionSequence), over one layer's
// paged KV cache (kv/kv_layer_view.h). Kernels see block tables as integer arrays, nothing more.
#pragma once

#include <cstdint>
#include <span>

#include "executor/forward_batch.h"
#include "kv/kv_layer_view.h"

namespace folio {

struct AttentionBatch {
  const float* q = nullptr;  // (num_tokens, num_heads, head_dim)
  float* out = nullptr;      // (num_tokens, num_heads, head_dim)
  int32_t num_tokens = 0;
  int32_t num_heads = 0;  // query heads; a multiple of the cache's num_kv_heads (GQA)
  float scale = 1.0f;     // softmax scale, usually 1 / sqrt(head_dim)
  std::span<const AttentionSequence> sequences;
  // Sliding-window attention: the query at position p sees keys p - window + 1 .. p (Gemma's
  // local layers, Mistral's window); 0: every key up to p.
  int32_t window = 0;
};

}  // namespace folio
