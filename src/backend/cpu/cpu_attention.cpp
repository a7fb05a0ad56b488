#include "backend/cpu/cpu_attention.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/quant/quant_kernels.h"
#include "core/fp16.h"
#include "core/fp16_rows.h"
#include "kv/kivi.h"
#include "kv/kv_quant.h"

namespace folio::cpu {

#include "backend/cpu/cpu_attention_tile.inc"

namespace {

constexpr int32_t kQueryTile = 16;  // query tokens per work item (they share K/V loads)
using WorkItem = TileWork;

std::vector<WorkItem> plan_work(const AttentionBatch& batch, const KvLayerView& cache) {
  std::vector<WorkItem> items;
  for (int32_t s = 0; s < static_cast<int32_t>(batch.sequences.size()); ++s) {
    const AttentionSequence& seq = batch.sequences[s];
    for (int32_t first = 0; first < seq.query_len; first += kQueryTile) {
      const int32_t count = std::min(kQueryTile, seq.query_len - first);
      for (int32_t h = 0; h < cache.num_kv_heads; ++h) items.push_back({s, first, count, h});
    }
  }
  // Longest context first so the threads finish together.
  std::stable_sort(items.begin(), items.end(), [&](const WorkItem& a, const WorkItem& b) {
    const auto end_of = [&](const WorkItem& w) {
      const AttentionSequence& seq = batch.sequences[w.sequence];
      return seq.context_len - seq.query_len + w.first_query + w.num_queries;
    };
    return end_of(a) > end_of(b);
  });
  return items;
}

}  // namespace

void paged_attention(const AttentionBatch& batch, const KvLayerView& cache, ThreadPool& pool) {
  assert(batch.num_heads % cache.num_kv_heads == 0);
  const std::vector<WorkItem> items = plan_work(batch, cache);
  const auto tile = isa_supported(Isa::kAvx512) ? attend_tile_avx512 : attend_tile_impl;
  const int64_t count = static_cast<int64_t>(items.size());
  // Interleaved assignment (item i to thread i % threads) balances the sorted costs.
  const int threads = pool.num_threads();
  pool.parallel_for(threads, [&](int, int64_t begin, int64_t end) {
    std::vector<float> scratch(attention_tile_scratch_floats(kQueryTile * batch.num_heads / cache.num_kv_heads,
                                                             cache.head_dim, cache.block_size));
    for (int64_t t = begin; t < end; ++t) {
      for (int64_t i = t; i < count; i += threads) tile(batch, cache, items[i], scratch.data());
    }
  });
}

namespace {

// Key or value j of a sequence as the query at `position` sees it (residual formats: its own
// block in fp16 from staging, earlier blocks quantized).
void reference_row(const KvLayerView& cache, const AttentionSequence& seq, int which, int32_t j, int32_t position,
                   int32_t kv_head, float* out) {
  const int32_t index = j / cache.block_size;
  if (kv_format_has_residual(cache.format) && index == position / cache.block_size) {
    const int32_t staging = seq.staging[static_cast<size_t>(index - seq.first_staged_block)];
    fp16_to_fp32_row(cache.staging_row(which, staging, j % cache.block_size, kv_head), out, cache.head_dim);
    return;
  }
  const int32_t slot = seq.block_table[index] * cache.block_size + j % cache.block_size;
  kv_load_row(cache, which, slot, kv_head, out);
}

}  // namespace

void paged_attention_reference(const AttentionBatch& batch, const KvLayerView& cache) {
  const int32_t head_dim = cache.head_dim;
  const int32_t group = batch.num_heads / cache.num_kv_heads;
  std::vector<float> row(static_cast<size_t>(head_dim));
  for (const AttentionSequence& seq : batch.sequences) {
    for (int32_t i = 0; i < seq.query_len; ++i) {
      const int32_t position = seq.context_len - seq.query_len + i;
      const int32_t token = seq.query_start + i;
      for (int32_t h = 0; h < batch.num_heads; ++h) {
        const int32_t kv_head = h / group;
        const float* q = batch.q + (static_cast<size_t>(token) * batch.num_heads + h) * head_dim;
        // The window's first key (all of them without a window).
        const int32_t first = batch.window > 0 ? std::max(0, position - batch.window + 1) : 0;
        std::vector<double> scores(position + 1, 0.0);
        double max_score = -std::numeric_limits<double>::infinity();
        for (int32_t j = first; j <= position; ++j) {
          reference_row(cache, seq, 0, j, position, kv_head, row.data());
          double s = 0.0;
          for (int32_t d = 0; d < head_dim; ++d) s += static_cast<double>(q[d]) * row[d];
          scores[j] = s * batch.scale;
          max_score = std::max(max_score, scores[j]);
        }
        double sum = 0.0;
        for (int32_t j = first; j <= position; ++j) sum += (scores[j] = std::exp(scores[j] - max_score));
        std::vector<double> out(head_dim, 0.0);
        for (int32_t j = first; j <= position; ++j) {
          reference_row(cache, seq, 1, j, position, kv_head, row.data());
          for (int32_t d = 0; d < head_dim; ++d) out[d] += scores[j] / sum * row[d];
        }
        float* dst = batch.out + (static_cast<size_t>(token) * batch.num_heads + h) * head_dim;
        for (int32_t d = 0; d < head_dim; ++d) dst[d] = static_cast<float>(out[d]);
      }
    }
  }
}

}  // namespace folio::cpu
