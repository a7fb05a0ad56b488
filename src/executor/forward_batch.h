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
//
// Residual formats (kv_format.h): blocks [first_staged_block, table size) are unsealed and keep
// their tokens in the staging blocks `staging` names, in order. A query at position p sees the
// blocks before its own (p / block_size) quantized and its own block in fp16 from staging.
struct AttentionSequence {
  int32_t query_start = 0;
  int32_t query_len = 0;
  int32_t context_len = 0;
  std::span<const int32_t> block_table;  // (ceil(context_len / block_size),) block ids
  int32_t first_staged_block = 0;
  std::span<const int32_t> staging{};  // (table size - first_staged_block,) staging ids
};

// A block this pass fills, to be quantized from its staging block once its K/V are written
// (in each layer, before that layer's attention reads it).
struct KvSeal {
  int32_t block = 0;
  int32_t staging = 0;
  bool operator==(const KvSeal&) const = default;
};

// Another block-table group's view of the batch (kv/kv_groups.h: sliding-window layers keep
// their own tables): where each token's K/V go in that group's blocks, each sequence's table,
// and the blocks the pass seals there. Tokens, positions and query ranges are the batch's.
struct KvGroupInputs {
  std::vector<int32_t> slot_mapping;         // (num_tokens,)
  std::vector<AttentionSequence> sequences;  // as ForwardBatch::sequences, this group's tables
  std::vector<KvSeal> seals;
};

struct ForwardBatch {
  // Copy-on-write, swap-out and swap-in copies, in the order the KV manager decided them; they
  // run before the tokens write K/V (kv/block_copy.h says why the order matters). A batch may
  // hold copies and no tokens.
  std::vector<BlockCopy> block_copies;
  std::vector<int32_t> tokens;     // (num_tokens,)
  std::vector<int32_t> positions;  // (num_tokens,)
  // (num_tokens,) cache slot = block * block_size + offset; with a residual format the slot is
  // in the staging blocks (staging * block_size + offset), where new tokens are written.
  std::vector<int32_t> slot_mapping;
  std::vector<AttentionSequence> sequences;  // query ranges cover [0, num_tokens) in order
  std::vector<int32_t> logit_rows;           // token indices whose next token is wanted
  std::vector<KvSeal> seals;                 // residual formats: blocks this pass fills
  // slot_mapping, sequences and seals above are group 0's; groups 1.. follow here (empty for a
  // model whose layers all see the whole context).
  std::vector<KvGroupInputs> more_kv_groups;

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  void clear() {
    block_copies.clear();
    tokens.clear();
    positions.clear();
    slot_mapping.clear();
    sequences.clear();
    logit_rows.clear();
    seals.clear();
    more_kv_groups.clear();
  }
};

}  // namespace folio
