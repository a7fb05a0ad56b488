// One forward pass's input: the block copies to run first, then a flat list of tokens from one
// or more sequences (prefill chunks and decode tokens mixed, no padding), where each token's K/V
// goes, and which rows need next-token logits (or a sampled token).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/block_copy.h"

namespace folio {

// Per-sequence slice of a flat batch. The sequence's new tokens are rows
// [query_start, query_start + query_len); they sit at positions
// [context_len - query_len, context_len) and attend causally to all context_len tokens,
// whose K/V the block table locates.
struct AttentionSequence {
  int32_t query_start = 0;
  int32_t query_len = 0;
  int32_t context_len = 0;
  std::span<const int32_t> block_table;  // (ceil(context_len / block_size),) block ids
};

struct ForwardBatch {
  // Copy-on-write, swap-out and swap-in copies, in the order the KV manager decided them; they
  // run before the tokens write K/V (kv/block_copy.h says why the order matters). A batch may
  // hold copies and no tokens.
  std::vector<BlockCopy> block_copies;
  std::vector<int32_t> tokens;               // (num_tokens,)
  std::vector<int32_t> positions;            // (num_tokens,)
  std::vector<int32_t> slot_mapping;         // (num_tokens,) cache slot = block * block_size + offset
  std::vector<AttentionSequence> sequences;  // query ranges cover [0, num_tokens) in order
  std::vector<int32_t> logit_rows;           // token indices whose next token is wanted

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  void clear() {
    block_copies.clear();
    tokens.clear();
    positions.clear();
    slot_mapping.clear();
    sequences.clear();
    logit_rows.clear();
  }
};

}  // namespace folio
