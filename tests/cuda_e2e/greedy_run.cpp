// A greedy run of one sequence straight through an executor (no engine): blocks 1.. in order,
// the prompt in one forward, then one token a step, the host taking the argmax (run_greedy) or
// the executor sampling on its side (run_device_greedy).
//
// Residual KV formats (fp8: the newest block waits in an fp16 staging block until it fills) get
// what the engine would give them: block i of the table borrows staging block i while it is the
// newest, new tokens go to the staging slots, and the pass that fills a block seals it. KIVI's
// window of several staged blocks and 32-token groups needs the engine; its checks use that.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "e2e_common.h"

namespace folio::e2e {
namespace {

// One sequence's pass over positions [done, total) of `all`.
class SequenceSteps {
 public:
  explicit SequenceSteps(const Executor& executor) : pool_(executor.kv_pool()) {
    residual_ = kv_format_has_residual(pool_.format);
    if (kv_format_is_kivi(pool_.format)) {
      std::fprintf(stderr, "greedy_run: KIVI needs the engine's window and seals\n");
      std::abort();
    }
  }

  ForwardBatch next(const std::vector<int32_t>& all, int32_t done) {
    const int32_t total = static_cast<int32_t>(all.size());
    while (static_cast<int32_t>(table_.size()) * kBlock < total) {
      table_.push_back(static_cast<int32_t>(table_.size()) + 1);
    }
    if (residual_ && static_cast<int32_t>(table_.size()) > pool_.num_staging_blocks) {
      std::fprintf(stderr, "greedy_run: %zu blocks need as many staging blocks, the pool has %d\n", table_.size(),
                   pool_.num_staging_blocks);
      std::abort();
    }
    // Blocks full before this pass are sealed; the rest (from the one holding token `done`) are staged.
    const int32_t first_staged = residual_ ? done / kBlock : 0;
    staging_.clear();
    for (int32_t b = first_staged; residual_ && b < static_cast<int32_t>(table_.size()); ++b) staging_.push_back(b);
    ForwardBatch batch;
    for (int32_t p = done; p < total; ++p) {
      const int32_t block = p / kBlock;
      batch.tokens.push_back(all[static_cast<size_t>(p)]);
      batch.positions.push_back(p);
      batch.slot_mapping.push_back((residual_ ? block : table_[static_cast<size_t>(block)]) * kBlock + p % kBlock);
    }
    AttentionSequence seq{0, total - done, total, table_};
    if (residual_) {
      seq.first_staged_block = first_staged;
      seq.staging = staging_;
      for (int32_t b = first_staged; (b + 1) * kBlock <= total; ++b) {
        batch.seals.push_back({table_[static_cast<size_t>(b)], b});
      }
    }
    batch.sequences.push_back(seq);
    batch.logit_rows.push_back(total - done - 1);
    return batch;
  }

 private:
  KvPoolLayout pool_;
  bool residual_ = false;
  std::vector<int32_t> table_;
  std::vector<int32_t> staging_;
};

}  // namespace

Greedy run_greedy(Executor& executor, const std::vector<int32_t>& prompt, int32_t steps) {
  Greedy out;
  SequenceSteps sequence(executor);
  std::vector<int32_t> all = prompt;
  const size_t vocab = static_cast<size_t>(executor.config().vocab_size);
  int32_t done = 0;
  for (int32_t step = 0; step <= steps; ++step) {
    const ForwardBatch batch = sequence.next(all, done);
    const std::span<const float> logits = executor.execute(batch, nullptr).logits;
    std::vector<float> row(logits.begin(), logits.begin() + static_cast<std::ptrdiff_t>(vocab));
    if (step == 0) out.last_prompt_logits = row;
    if (step == steps) break;
    std::vector<int32_t> ids(vocab);
    for (size_t i = 0; i < vocab; ++i) ids[i] = static_cast<int32_t>(i);
    std::partial_sort(ids.begin(), ids.begin() + 2, ids.end(),
                      [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    out.tokens.push_back(ids[0]);
    out.margins.push_back(row[static_cast<size_t>(ids[0])] - row[static_cast<size_t>(ids[1])]);
    done = static_cast<int32_t>(all.size());
    all.push_back(ids[0]);
  }
  return out;
}

// The same greedy run with the executor choosing the tokens on its side (a greedy
// SamplingPlan): only token ids and logprobs come back.
std::vector<SampledToken> run_device_greedy(Executor& executor, const std::vector<int32_t>& prompt, int32_t steps) {
  std::vector<SampledToken> out;
  SamplingPlan plan;
  plan.rows.resize(1);
  plan.rows[0].temperature = 0.0f;
  SequenceSteps sequence(executor);
  std::vector<int32_t> all = prompt;
  int32_t done = 0;
  for (int32_t step = 0; step < steps; ++step) {
    const ForwardBatch batch = sequence.next(all, done);
    const std::span<const SampledToken> sampled = executor.execute(batch, &plan).tokens;
    out.push_back(sampled[0]);
    done = static_cast<int32_t>(all.size());
    all.push_back(sampled[0].token);
  }
  return out;
}

}  // namespace folio::e2e
