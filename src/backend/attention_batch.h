// Plain views that attention kernels take: a varlen batch of query tokens from many sequences,
// and one layer's paged KV cache. Kernels see block tables as integer arrays, nothing more.
#pragma once

#include <cstdint>
#include <span>

namespace folio {

// One layer of the paged KV cache, in fp16 (half the memory of fp32, and the precision
// llama.cpp and most engines keep K/V in). Block b, slot s, kv head h starts at
//   k + ((b * block_size + s) * num_kv_heads + h) * head_dim
// so a slot index (b * block_size + s) addresses one token's K (or V) for all heads.
struct KvLayerView {
  uint16_t* k = nullptr;  // (num_blocks, block_size, num_kv_heads, head_dim) fp16 bits
  uint16_t* v = nullptr;  // (num_blocks, block_size, num_kv_heads, head_dim) fp16 bits
  int32_t num_blocks = 0;
  int32_t block_size = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
};

// Per-sequence slice of a flat batch. The sequence's new tokens are query rows
// [query_start, query_start + query_len); they sit at positions
// [context_len - query_len, context_len) and attend causally to all context_len tokens,
// whose K/V the block table locates.
struct AttentionSequence {
  int32_t query_start = 0;
  int32_t query_len = 0;
  int32_t context_len = 0;
  std::span<const int32_t> block_table;  // (ceil(context_len / block_size),) block ids
};

struct AttentionBatch {
  const float* q = nullptr;  // (num_tokens, num_heads, head_dim)
  float* out = nullptr;      // (num_tokens, num_heads, head_dim)
  int32_t num_tokens = 0;
  int32_t num_heads = 0;     // query heads; a multiple of the cache's num_kv_heads (GQA)
  float scale = 1.0f;        // softmax scale, usually 1 / sqrt(head_dim)
  std::span<const AttentionSequence> sequences;
};

}  // namespace folio
