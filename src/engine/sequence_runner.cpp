#include "engine/sequence_runner.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "engine/request_limits.h"

namespace folio {

SequenceRunner::SequenceRunner(Executor& executor, int32_t max_tokens, int32_t max_batch_tokens)
    : executor_(executor),
      max_batch_tokens_(std::max(1, std::min(max_batch_tokens, executor.capabilities().max_batch_tokens))),
      max_logit_rows_(std::max(1, executor.capabilities().max_logit_rows)),
      block_size_(executor.kv_pool().block_size),
      num_groups_(std::max<int32_t>(1, static_cast<int32_t>(executor.kv_pool().group_windows.size()))),
      num_staging_(executor.kv_pool().num_staging_blocks / num_groups_),
      requested_tokens_(std::max(1, max_tokens)) {
  const int32_t wanted_blocks = (requested_tokens_ + block_size_ - 1) / block_size_;
  const int32_t blocks = std::min(wanted_blocks, (executor.kv_pool().num_blocks - 1) / num_groups_);
  capacity_ = blocks * block_size_;
  // Group g gets blocks g * blocks + 1 .. (g + 1) * blocks, in reverse order: nothing may assume
  // a sequence's blocks are contiguous.
  block_tables_.resize(static_cast<size_t>(num_groups_));
  staging_.resize(static_cast<size_t>(num_groups_));
  for (int32_t g = 0; g < num_groups_; ++g) {
    std::vector<int32_t>& table = block_tables_[static_cast<size_t>(g)];
    table.resize(static_cast<size_t>(std::max(0, blocks)));
    std::iota(table.rbegin(), table.rend(), 1 + g * blocks);
  }
}

Expected<std::vector<float>> SequenceRunner::append(std::span<const int32_t> tokens, bool all_logits) {
  const int32_t vocab = executor_.config().vocab_size;
  if (tokens.empty()) return Status::error("no tokens to evaluate");
  if (num_tokens_ + static_cast<int64_t>(tokens.size()) > capacity_) {
    if (capacity_ < requested_tokens_) {
      return Status::error("the KV pool holds " + std::to_string(capacity_) + " tokens, fewer than the " +
                           std::to_string(requested_tokens_) + " asked for");
    }
    return Status::error("context is full: " + std::to_string(num_tokens_) + " + " + std::to_string(tokens.size()) +
                         " tokens exceed the context size " + std::to_string(capacity_));
  }
  if (Status s = check_token_ids(tokens, vocab); !s) return s;
  std::vector<float> logits(static_cast<size_t>(all_logits ? tokens.size() : 1) * vocab);
  size_t chunk_limit =
      static_cast<size_t>(all_logits ? std::min(max_batch_tokens_, max_logit_rows_) : max_batch_tokens_);
  // A chunk of c tokens writes into at most c / block_size + 2 blocks, each needing its own
  // staging block.
  if (num_staging_ > 0) {
    chunk_limit = num_staging_ >= 3 ? std::min(chunk_limit, static_cast<size_t>(num_staging_ - 2) * block_size_) : 1;
  }
  batch_.more_kv_groups.resize(static_cast<size_t>(num_groups_ - 1));
  for (size_t begin = 0; begin < tokens.size(); begin += chunk_limit) {
    const int32_t n = static_cast<int32_t>(std::min(chunk_limit, tokens.size() - begin));
    const bool last_chunk = begin + n == tokens.size();
    batch_.clear();
    batch_.more_kv_groups.resize(static_cast<size_t>(num_groups_ - 1));
    batch_.tokens.assign(tokens.begin() + static_cast<ptrdiff_t>(begin),
                         tokens.begin() + static_cast<ptrdiff_t>(begin) + n);
    for (int32_t i = 0; i < n; ++i) batch_.positions.push_back(num_tokens_ + i);
    // Residual formats: the blocks this chunk writes are the unsealed ones, from the one holding
    // the first new token; block i borrows staging block i % num_staging (chunk_limit keeps
    // them distinct), and the blocks the chunk fills are sealed.
    const int32_t first_staged = num_staging_ > 0 ? num_tokens_ / block_size_ : 0;
    const int32_t end = num_tokens_ + n;
    const int32_t used_blocks = (end + block_size_ - 1) / block_size_;
    for (int32_t g = 0; g < num_groups_; ++g) {
      const std::vector<int32_t>& table = block_tables_[static_cast<size_t>(g)];
      std::vector<int32_t>& staging = staging_[static_cast<size_t>(g)];
      std::vector<int32_t>& slots = g == 0 ? batch_.slot_mapping : batch_.more_kv_groups[g - 1].slot_mapping;
      std::vector<KvSeal>& seals = g == 0 ? batch_.seals : batch_.more_kv_groups[g - 1].seals;
      std::vector<AttentionSequence>& sequences = g == 0 ? batch_.sequences : batch_.more_kv_groups[g - 1].sequences;
      const auto staging_of = [&](int32_t index) { return g * num_staging_ + index % num_staging_; };
      for (int32_t position = num_tokens_; position < end; ++position) {
        const int32_t index = position / block_size_;
        const int32_t block = num_staging_ > 0 ? staging_of(index) : table[static_cast<size_t>(index)];
        slots.push_back(block * block_size_ + position % block_size_);
      }
      staging.clear();
      if (num_staging_ > 0) {
        for (int32_t index = first_staged; index < used_blocks; ++index) staging.push_back(staging_of(index));
        for (int32_t index = first_staged; index < end / block_size_; ++index) {
          seals.push_back({table[static_cast<size_t>(index)], staging_of(index)});
        }
      }
      sequences.push_back(AttentionSequence{0, n, end,
                                            std::span<const int32_t>(table.data(), static_cast<size_t>(used_blocks)),
                                            num_staging_ > 0 ? first_staged : used_blocks, staging});
    }
    num_tokens_ = end;
    float* out = nullptr;
    if (all_logits) {
      for (int32_t i = 0; i < n; ++i) batch_.logit_rows.push_back(i);
      out = logits.data() + begin * static_cast<size_t>(vocab);
    } else if (last_chunk) {
      batch_.logit_rows.push_back(n - 1);
      out = logits.data();
    }
    const StepResult result = executor_.execute(batch_, nullptr);
    if (out != nullptr) std::copy(result.logits.begin(), result.logits.end(), out);
  }
  return logits;
}

}  // namespace folio
