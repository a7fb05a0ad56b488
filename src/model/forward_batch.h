// One forward pass's input: a flat list of tokens from one or more sequences (prefill chunks
// and decode tokens mixed, no padding), where each token's K/V goes, and which rows need logits.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/attention_batch.h"

namespace folio {

struct ForwardBatch {
  std::vector<int32_t> tokens;        // (num_tokens,)
  std::vector<int32_t> positions;     // (num_tokens,)
  std::vector<int32_t> slot_mapping;  // (num_tokens,) cache slot = block * block_size + offset
  std::vector<AttentionSequence> sequences;  // query ranges cover [0, num_tokens) in order
  std::vector<int32_t> logit_rows;    // token indices whose next-token logits are wanted

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
};

}  // namespace folio
