#include "backend/cpu/cpu_attention.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <vector>

#include "core/fp16.h"
#include "core/fp16_rows.h"

namespace folio::cpu {
namespace {

// Query tokens handled together: they share every K/V block load.
constexpr int32_t kQueryTile = 8;

struct WorkItem {
  int32_t sequence;
  int32_t first_query;  // within the sequence
  int32_t num_queries;
  int32_t kv_head;
};

float dot(const float* a, const float* b, int32_t n) {
  float sum = 0.0f;
  for (int32_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// One tile: num_queries tokens x group query heads, all reading kv_head.
void attend_tile(const AttentionBatch& batch, const KvLayerView& cache, const WorkItem& item,
                 std::vector<float>& scratch) {
  const AttentionSequence& seq = batch.sequences[item.sequence];
  const int32_t head_dim = cache.head_dim;
  const int32_t group = batch.num_heads / cache.num_kv_heads;
  const int32_t rows = item.num_queries * group;
  const int32_t block_size = cache.block_size;
  const int32_t first_position = seq.context_len - seq.query_len;

  // scratch: acc (rows, head_dim) | running max (rows) | running sum (rows) |
  //          scores (rows, block) | K tile (block, head_dim) | V tile (block, head_dim)
  scratch.assign(static_cast<size_t>(rows) * (head_dim + 2 + block_size) +
                     2 * static_cast<size_t>(block_size) * head_dim, 0.0f);
  float* acc = scratch.data();
  float* running_max = acc + rows * head_dim;
  float* running_sum = running_max + rows;
  float* scores = running_sum + rows;
  float* k_tile = scores + rows * block_size;
  float* v_tile = k_tile + block_size * head_dim;
  std::fill(running_max, running_max + rows, -std::numeric_limits<float>::infinity());

  auto query_row = [&](int32_t row) {
    const int32_t token = seq.query_start + item.first_query + row / group;
    const int32_t head = item.kv_head * group + row % group;
    return batch.q + (static_cast<size_t>(token) * batch.num_heads + head) * head_dim;
  };
  auto row_position = [&](int32_t row) { return first_position + item.first_query + row / group; };

  const int32_t last_position = row_position(rows - 1);
  const int32_t num_blocks = last_position / block_size + 1;
  const size_t token_stride = static_cast<size_t>(cache.num_kv_heads) * head_dim;

  for (int32_t b = 0; b < num_blocks; ++b) {
    const int32_t block_id = seq.block_table[b];
    assert(block_id >= 0 && block_id < cache.num_blocks);
    const int32_t block_start = b * block_size;
    const int32_t keys = std::min(block_size, last_position + 1 - block_start);
    // The block's K and V for this head, converted once and used by every row of the tile.
    const size_t block_offset = static_cast<size_t>(block_id) * block_size * token_stride +
                                static_cast<size_t>(item.kv_head) * head_dim;
    for (int32_t s = 0; s < keys; ++s) {
      fp16_to_fp32_row(cache.k + block_offset + s * token_stride, k_tile + s * head_dim, head_dim);
      fp16_to_fp32_row(cache.v + block_offset + s * token_stride, v_tile + s * head_dim, head_dim);
    }
    for (int32_t row = 0; row < rows; ++row) {
      const int32_t visible = std::min(keys, row_position(row) + 1 - block_start);
      if (visible <= 0) continue;
      const float* q = query_row(row);
      float* row_scores = scores + row * block_size;
      float block_max = -std::numeric_limits<float>::infinity();
      for (int32_t s = 0; s < visible; ++s) {
        row_scores[s] = dot(q, k_tile + s * head_dim, head_dim) * batch.scale;
        block_max = std::max(block_max, row_scores[s]);
      }
      const float new_max = std::max(running_max[row], block_max);
      const float correction = std::exp(running_max[row] - new_max);
      float* row_acc = acc + row * head_dim;
      running_sum[row] *= correction;
      for (int32_t d = 0; d < head_dim; ++d) row_acc[d] *= correction;
      for (int32_t s = 0; s < visible; ++s) {
        const float p = std::exp(row_scores[s] - new_max);
        running_sum[row] += p;
        const float* v = v_tile + s * head_dim;
        for (int32_t d = 0; d < head_dim; ++d) row_acc[d] += p * v[d];
      }
      running_max[row] = new_max;
    }
  }

  for (int32_t row = 0; row < rows; ++row) {
    const int32_t token = seq.query_start + item.first_query + row / group;
    const int32_t head = item.kv_head * group + row % group;
    float* out = batch.out + (static_cast<size_t>(token) * batch.num_heads + head) * head_dim;
    const float inv_sum = 1.0f / running_sum[row];
    for (int32_t d = 0; d < head_dim; ++d) out[d] = acc[row * head_dim + d] * inv_sum;
  }
}

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
  const int64_t count = static_cast<int64_t>(items.size());
  // Interleaved assignment (item i to thread i % threads) balances the sorted costs.
  const int threads = pool.num_threads();
  pool.parallel_for(threads, [&](int, int64_t begin, int64_t end) {
    std::vector<float> scratch;
    for (int64_t t = begin; t < end; ++t) {
      for (int64_t i = t; i < count; i += threads) attend_tile(batch, cache, items[i], scratch);
    }
  });
}

void paged_attention_reference(const AttentionBatch& batch, const KvLayerView& cache) {
  const int32_t head_dim = cache.head_dim;
  const int32_t group = batch.num_heads / cache.num_kv_heads;
  const size_t token_stride = static_cast<size_t>(cache.num_kv_heads) * head_dim;
  for (const AttentionSequence& seq : batch.sequences) {
    for (int32_t i = 0; i < seq.query_len; ++i) {
      const int32_t position = seq.context_len - seq.query_len + i;
      const int32_t token = seq.query_start + i;
      for (int32_t h = 0; h < batch.num_heads; ++h) {
        const int32_t kv_head = h / group;
        const float* q = batch.q + (static_cast<size_t>(token) * batch.num_heads + h) * head_dim;
        std::vector<double> scores(position + 1);
        double max_score = -std::numeric_limits<double>::infinity();
        for (int32_t j = 0; j <= position; ++j) {
          const int32_t slot = seq.block_table[j / cache.block_size] * cache.block_size +
                               j % cache.block_size;
          const uint16_t* k = cache.k + slot * token_stride + kv_head * head_dim;
          double s = 0.0;
          for (int32_t d = 0; d < head_dim; ++d) s += static_cast<double>(q[d]) * fp16_to_fp32(k[d]);
          scores[j] = s * batch.scale;
          max_score = std::max(max_score, scores[j]);
        }
        double sum = 0.0;
        for (double& s : scores) sum += (s = std::exp(s - max_score));
        std::vector<double> out(head_dim, 0.0);
        for (int32_t j = 0; j <= position; ++j) {
          const int32_t slot = seq.block_table[j / cache.block_size] * cache.block_size +
                               j % cache.block_size;
          const uint16_t* v = cache.v + slot * token_stride + kv_head * head_dim;
          for (int32_t d = 0; d < head_dim; ++d) out[d] += scores[j] / sum * fp16_to_fp32(v[d]);
        }
        float* dst = batch.out + (static_cast<size_t>(token) * batch.num_heads + h) * head_dim;
        for (int32_t d = 0; d < head_dim; ++d) dst[d] = static_cast<float>(out[d]);
      }
    }
  }
}

}  // namespace folio::cpu
