// What one engine step runs: which requests, how many new tokens each (a prefill chunk or one
// decode token), and which of them sample a token at the end. A plain struct that can be
// printed when a step fails.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/request.h"

namespace folio {

struct ScheduledChunk {
  Request* request = nullptr;
  int32_t first_position = 0;   // == request->num_computed_tokens when scheduled
  int32_t num_new_tokens = 0;
  bool samples = false;         // the chunk reaches the request's last token
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;  // running order; their tokens form the flat batch
  std::vector<RequestId> preempted;    // this step, by recompute or swap
  int32_t num_batched_tokens = 0;

  bool empty() const { return chunks.empty(); }
  std::string to_string() const;
};

}  // namespace folio
