// A greedy run of one sequence straight through an executor (no engine): blocks 1.. in order,
// the prompt in one forward, then one token a step, the host taking the argmax.
#include <algorithm>

#include "e2e_common.h"

namespace folio::e2e {

Greedy run_greedy(Executor& executor, const std::vector<int32_t>& prompt, int32_t steps) {
  Greedy out;
  std::vector<int32_t> table;
  std::vector<int32_t> all = prompt;
  const size_t vocab = static_cast<size_t>(executor.config().vocab_size);
  int32_t done = 0;
  for (int32_t step = 0; step <= steps; ++step) {
    const int32_t total = static_cast<int32_t>(all.size());
    while (static_cast<int32_t>(table.size()) * kBlock < total) table.push_back(static_cast<int32_t>(table.size()) + 1);
    ForwardBatch batch;
    for (int32_t p = done; p < total; ++p) {
      batch.tokens.push_back(all[static_cast<size_t>(p)]);
      batch.positions.push_back(p);
      batch.slot_mapping.push_back(table[static_cast<size_t>(p / kBlock)] * kBlock + p % kBlock);
    }
    batch.sequences.push_back({0, total - done, total, table});
    batch.logit_rows.push_back(total - done - 1);
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
    done = total;
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
  std::vector<int32_t> table;
  std::vector<int32_t> all = prompt;
  int32_t done = 0;
  for (int32_t step = 0; step < steps; ++step) {
    const int32_t total = static_cast<int32_t>(all.size());
    while (static_cast<int32_t>(table.size()) * kBlock < total) table.push_back(static_cast<int32_t>(table.size()) + 1);
    ForwardBatch batch;
    for (int32_t p = done; p < total; ++p) {
      batch.tokens.push_back(all[static_cast<size_t>(p)]);
      batch.positions.push_back(p);
      batch.slot_mapping.push_back(table[static_cast<size_t>(p / kBlock)] * kBlock + p % kBlock);
    }
    batch.sequences.push_back({0, total - done, total, table});
    batch.logit_rows.push_back(total - done - 1);
    const std::span<const SampledToken> sampled = executor.execute(batch, &plan).tokens;
    out.push_back(sampled[0]);
    done = total;
    all.push_back(sampled[0].token);
  }
  return out;
}

}  // namespace folio::e2e
