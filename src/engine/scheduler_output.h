// What one engine step runs: which requests, how many new tokens each (a prefill chunk or one
// decode token), where their K/V live, which of them sample a token at the end, and the block
// copies the KV manager decided while scheduling. A plain struct that can be printed when a
// step fails; the model runner turns it into the executor's ForwardBatch without asking the KV
// manager anything.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/request.h"
#include "kv/block_copy.h"

namespace folio {

// A chunk's tables in one more block-table group (kv/kv_groups.h), as the fields below are for
// group 0.
struct ChunkGroupTable {
  std::span<const int32_t> block_table;
  int32_t first_staged_block = 0;
  std::vector<int32_t> staging{};
};

struct ScheduledChunk {
  Request* request = nullptr;
  int32_t first_position = 0;  // == request->num_computed_tokens when scheduled
  int32_t num_new_tokens = 0;  // proposals included
  bool samples = false;        // the chunk reaches the request's last token
  // The sequence's block table after this step's allocation, covering every position up to
  // first_position + num_new_tokens. Valid until the KV manager next changes (the end of the
  // step's execute()).
  std::span<const int32_t> block_table;
  // Residual formats: the first unsealed block's index and the unsealed blocks' staging ids
  // (KvCacheManager::staged_blocks); the table's size and nothing otherwise.
  int32_t first_staged_block = 0;
  std::vector<int32_t> staging{};
  // Speculative decoding: the last num_draft_tokens of the chunk are the request's proposals
  // (request->speculation.draft_tokens), past its last token; every one of the chunk's tokens
  // gets a logit row, and verification decides how many of their K/V stay.
  int32_t num_draft_tokens = 0;
  // Groups 1.. (sliding-window layers' tables); empty with one group.
  std::vector<ChunkGroupTable> more_groups{};
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;   // running order; their tokens form the flat batch
  std::vector<BlockCopy> block_copies;  // copy-on-write, swap out, swap in: run first, in order
  std::vector<RequestId> preempted;     // this step, by recompute or swap
  int32_t num_batched_tokens = 0;
  int32_t block_size = 0;
  bool kv_residual = false;  // new K/V go to staging blocks (KvCacheManager::has_residual)

  bool empty() const { return chunks.empty() && block_copies.empty(); }
  std::string to_string() const;
};

}  // namespace folio
