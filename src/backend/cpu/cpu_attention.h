// Paged causal attention on the CPU for a varlen batch (prefill chunks and decode tokens of
// many sequences together), FlashAttention-2's algorithm: K/V are visited one cache block at a
// time with an online softmax, so memory stays O(tile) at any context length. With a sliding
// window (AttentionBatch::window) only the blocks inside some query's window are visited.
#pragma once

#include "backend/attention_batch.h"
#include "core/thread_pool.h"

#include <cstddef>
#include <cstdint>

namespace folio::cpu {

void paged_attention(const AttentionBatch& batch, const KvLayerView& cache, ThreadPool& pool);

// Query rows of a tile that go through a block together (their fma chains interleave).
constexpr int32_t kAttentionRowGroup = 8;

// Keys of a context chunk: every row's context is cut at the same absolute positions, each chunk
// gets its own online softmax, and the chunks are folded in order. Long contexts then split
// into independent work items (a decode step alone offers only num_kv_heads of them a
// sequence), and a row's bits stay the same however its chunks were scheduled.
constexpr int32_t kContextChunkKeys = 256;

// Floats of scratch one tile of `rows` query rows needs.
inline size_t attention_tile_scratch_floats(int32_t rows, int32_t head_dim, int32_t block_size) {
  return static_cast<size_t>(rows) * (3 * head_dim + 4) + static_cast<size_t>(kAttentionRowGroup) * block_size +
         4 * static_cast<size_t>(block_size) * head_dim + head_dim;
}

// One unit of attention work: a tile of query tokens of one sequence, all query heads that
// read one KV head, over the context chunks [first_chunk, end_chunk).
struct TileWork {
  int32_t sequence;
  int32_t first_query;  // within the sequence
  int32_t num_queries;
  int32_t kv_head;
  int32_t first_chunk;
  int32_t end_chunk;
  int32_t chunk_blocks;      // cache blocks a chunk
  float* partial = nullptr;  // null: write the output; else (one chunk) its rows' state here:
                             // rows x (head_dim unnormalized outputs, max, sum)
};

// The tile kernel compiled for AVX-512 (cpu_attention_avx512.cpp); call only where supported.
void attend_tile_avx512(const AttentionBatch& batch, const KvLayerView& cache, const TileWork& item, float* scratch);
// The outputs of a tile whose chunks [first_chunk, end_chunk) ran as separate items with
// partial states written one chunk after another from `partials`; total: head_dim floats.
void merge_tile_chunks_avx512(const AttentionBatch& batch, const KvLayerView& cache, const TileWork& item,
                              const float* partials, float* total);

// Single-threaded float64 reference with a full softmax per query, for tests.
void paged_attention_reference(const AttentionBatch& batch, const KvLayerView& cache);

}  // namespace folio::cpu
