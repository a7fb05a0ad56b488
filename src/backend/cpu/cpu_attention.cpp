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
// Partial states a call may hold for split tiles (floats, 16 MiB): bounds the memory a long
// prefill could ask for; tiles past it run their chunks one after another in one item.
constexpr size_t kMaxPartialFloats = size_t{4} << 20;

// The work of one call: items for the threads, and the tiles whose chunks became separate
// items (merged afterwards from `partials`).
struct WorkPlan {
  std::vector<TileWork> items;
  std::vector<TileWork> split_tiles;  // partial: where its first chunk's state starts
  std::vector<float> partials;
};

// Keys times query rows: how long an item takes, roughly.
int64_t item_cost(const AttentionBatch& batch, const KvLayerView& cache, const TileWork& w) {
  const AttentionSequence& seq = batch.sequences[static_cast<size_t>(w.sequence)];
  const int64_t chunk_keys = static_cast<int64_t>(w.chunk_blocks) * cache.block_size;
  const int64_t end =
      std::min<int64_t>(seq.context_len - seq.query_len + w.first_query + w.num_queries, w.end_chunk * chunk_keys);
  const int64_t window_start =
      batch.window > 0 ? seq.context_len - seq.query_len + w.first_query - batch.window + 1 : 0;
  const int64_t begin = std::max<int64_t>(window_start, w.first_chunk * chunk_keys);
  return (end - begin) * w.num_queries;
}

WorkPlan plan_work(const AttentionBatch& batch, const KvLayerView& cache, int threads) {
  const int32_t chunk_blocks = std::max(1, kContextChunkKeys / cache.block_size);
  std::vector<TileWork> tiles;
  for (int32_t s = 0; s < static_cast<int32_t>(batch.sequences.size()); ++s) {
    const AttentionSequence& seq = batch.sequences[s];
    const int32_t first_position = seq.context_len - seq.query_len;
    for (int32_t first = 0; first < seq.query_len; first += kQueryTile) {
      const int32_t count = std::min(kQueryTile, seq.query_len - first);
      // The blocks the tile reads (as attend_tile_impl finds them): from its first row's window.
      const int32_t first_key = batch.window > 0 ? first_position + first - batch.window + 1 : 0;
      const int32_t first_block = first_key > 0 ? first_key / cache.block_size : 0;
      const int32_t num_blocks = (first_position + first + count - 1) / cache.block_size + 1;
      const int32_t first_chunk = first_block / chunk_blocks;
      const int32_t end_chunk = (num_blocks - 1) / chunk_blocks + 1;
      for (int32_t h = 0; h < cache.num_kv_heads; ++h) {
        tiles.push_back({s, first, count, h, first_chunk, end_chunk, chunk_blocks});
      }
    }
  }
  // Costliest first, so the threads taking items from a shared counter finish together.
  const auto by_cost = [&](const TileWork& a, const TileWork& b) {
    return item_cost(batch, cache, a) > item_cost(batch, cache, b);
  };
  std::stable_sort(tiles.begin(), tiles.end(), by_cost);

  // Too few tiles to keep the threads busy (a decode step of few sequences): the longest ones
  // run each chunk as an item of its own.
  WorkPlan plan;
  const int32_t group = batch.num_heads / cache.num_kv_heads;
  const size_t stride = static_cast<size_t>(cache.head_dim) + 2;
  std::vector<size_t> offsets;
  size_t floats = 0;
  const bool split = static_cast<int64_t>(tiles.size()) < 4 * static_cast<int64_t>(threads);
  for (const TileWork& tile : tiles) {
    const size_t need = static_cast<size_t>(tile.end_chunk - tile.first_chunk) * tile.num_queries * group * stride;
    if (!split || tile.end_chunk - tile.first_chunk < 2 || floats + need > kMaxPartialFloats) {
      plan.items.push_back(tile);
      continue;
    }
    plan.split_tiles.push_back(tile);
    offsets.push_back(floats);
    floats += need;
  }
  plan.partials.resize(floats);
  for (size_t t = 0; t < plan.split_tiles.size(); ++t) {
    TileWork& tile = plan.split_tiles[t];
    tile.partial = plan.partials.data() + offsets[t];
    const size_t chunk_floats = static_cast<size_t>(tile.num_queries) * group * stride;
    for (int32_t c = tile.first_chunk; c < tile.end_chunk; ++c) {
      TileWork item = tile;
      item.first_chunk = c;
      item.end_chunk = c + 1;
      item.partial = tile.partial + static_cast<size_t>(c - tile.first_chunk) * chunk_floats;
      plan.items.push_back(item);
    }
  }
  std::stable_sort(plan.items.begin(), plan.items.end(), by_cost);
  return plan;
}

}  // namespace

void paged_attention(const AttentionBatch& batch, const KvLayerView& cache, ThreadPool& pool) {
  assert(batch.num_heads % cache.num_kv_heads == 0);
  const int threads = pool.num_threads();
  WorkPlan plan = plan_work(batch, cache, threads);
  const bool avx512 = isa_supported(Isa::kAvx512);
  const auto tile = avx512 ? attend_tile_avx512 : attend_tile_impl;
  const auto merge = avx512 ? merge_tile_chunks_avx512 : merge_tile_chunks_impl;
  const size_t scratch_floats = attention_tile_scratch_floats(kQueryTile * batch.num_heads / cache.num_kv_heads,
                                                              cache.head_dim, cache.block_size);
  std::vector<std::vector<float>> scratch(static_cast<size_t>(threads));
  // Items from a shared counter: the threads of a 2-core guest run at different speeds.
  pool.parallel_for_dynamic(
      static_cast<int64_t>(plan.items.size()),
      [&](int thread, int64_t begin, int64_t end) {
        std::vector<float>& mine = scratch[static_cast<size_t>(thread)];
        if (mine.empty()) mine.resize(scratch_floats);
        for (int64_t i = begin; i < end; ++i) tile(batch, cache, plan.items[static_cast<size_t>(i)], mine.data());
      },
      1);
  if (plan.split_tiles.empty()) return;
  pool.parallel_for(static_cast<int64_t>(plan.split_tiles.size()), [&](int, int64_t begin, int64_t end) {
    std::vector<float> total(static_cast<size_t>(cache.head_dim));
    for (int64_t t = begin; t < end; ++t) {
      const TileWork& split_tile = plan.split_tiles[static_cast<size_t>(t)];
      merge(batch, cache, split_tile, split_tile.partial, total.data());
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
