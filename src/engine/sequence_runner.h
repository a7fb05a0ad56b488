// Runs one sequence through the model: the simple single-sequence path behind `folio run`,
// `folio perplexity` and `folio bench` until the paged engine takes over. It still goes
// through the paged interface: the sequence owns a block table into a KvCacheStorage.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "kv/kv_cache_storage.h"
#include "model/llama_model.h"

namespace folio {

class SequenceRunner {
 public:
  // Room for max_tokens tokens; prompts are fed at most max_batch_tokens per forward pass.
  SequenceRunner(LlamaModel& model, Backend& backend, int32_t max_tokens,
                 int32_t max_batch_tokens = 512, int32_t block_size = 16);

  int32_t num_tokens() const { return num_tokens_; }
  int32_t capacity() const { return capacity_; }
  void reset() { num_tokens_ = 0; }

  // Appends tokens and returns the logits after the last one: (vocab,). With all_logits the
  // logits after every appended token: (tokens.size(), vocab).
  Expected<std::vector<float>> append(std::span<const int32_t> tokens, bool all_logits = false);

 private:
  LlamaModel& model_;
  Backend& backend_;
  int32_t max_batch_tokens_;
  int32_t block_size_;
  int32_t capacity_;
  KvCacheStorage cache_;
  std::vector<int32_t> block_table_;  // (capacity / block_size,): blocks in order
  int32_t num_tokens_ = 0;
};

}  // namespace folio
