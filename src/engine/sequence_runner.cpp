#include "engine/sequence_runner.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace folio {
namespace {
int32_t round_up(int32_t value, int32_t multiple) { return (value + multiple - 1) / multiple * multiple; }
}  // namespace

SequenceRunner::SequenceRunner(LlamaModel& model, Backend& backend, int32_t max_tokens,
                               int32_t max_batch_tokens, int32_t block_size)
    : model_(model),
      backend_(backend),
      max_batch_tokens_(std::max(1, max_batch_tokens)),
      block_size_(block_size),
      capacity_(round_up(std::max(1, max_tokens), block_size)),
      cache_(model.kv_shape(capacity_ / block_size, block_size)),
      block_table_(capacity_ / block_size) {
  // Blocks in reverse order: nothing may assume a sequence's blocks are contiguous.
  std::iota(block_table_.rbegin(), block_table_.rend(), 0);
}

Expected<std::vector<float>> SequenceRunner::append(std::span<const int32_t> tokens,
                                                    bool all_logits) {
  const int32_t vocab = model_.config().vocab_size;
  if (tokens.empty()) return Status::error("no tokens to evaluate");
  if (num_tokens_ + static_cast<int64_t>(tokens.size()) > capacity_) {
    return Status::error("context is full: " + std::to_string(num_tokens_) + " + " +
                         std::to_string(tokens.size()) + " tokens exceed the context size " +
                         std::to_string(capacity_));
  }
  for (int32_t id : tokens) {
    if (id < 0 || id >= vocab) return Status::error("token id " + std::to_string(id) + " is out of range");
  }
  std::vector<float> logits(static_cast<size_t>(all_logits ? tokens.size() : 1) * vocab);
  ForwardBatch batch;
  for (size_t begin = 0; begin < tokens.size(); begin += max_batch_tokens_) {
    const int32_t n = static_cast<int32_t>(std::min<size_t>(max_batch_tokens_, tokens.size() - begin));
    const bool last_chunk = begin + n == tokens.size();
    batch.tokens.assign(tokens.begin() + begin, tokens.begin() + begin + n);
    batch.positions.resize(n);
    batch.slot_mapping.resize(n);
    for (int32_t i = 0; i < n; ++i) {
      const int32_t position = num_tokens_ + i;
      batch.positions[i] = position;
      batch.slot_mapping[i] = block_table_[position / block_size_] * block_size_ + position % block_size_;
    }
    num_tokens_ += n;
    const int32_t used_blocks = (num_tokens_ + block_size_ - 1) / block_size_;
    batch.sequences = {AttentionSequence{0, n, num_tokens_,
                                         std::span<const int32_t>(block_table_.data(), used_blocks)}};
    batch.logit_rows.clear();
    float* out = nullptr;
    if (all_logits) {
      for (int32_t i = 0; i < n; ++i) batch.logit_rows.push_back(i);
      out = logits.data() + begin * vocab;
    } else if (last_chunk) {
      batch.logit_rows.push_back(n - 1);
      out = logits.data();
    }
    model_.forward(backend_, batch, cache_, out);
  }
  return logits;
}

}  // namespace folio
