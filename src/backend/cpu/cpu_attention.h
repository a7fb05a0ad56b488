// Paged causal attention on the CPU for a varlen batch (prefill chunks and decode tokens of
// many sequences together), FlashAttention-2's algorithm: K/V are visited one cache block at a
// time with an online softmax, so memory stays O(tile) at any context length.
#pragma once

#include "backend/attention_batch.h"
#include "core/thread_pool.h"

namespace folio::cpu {

void paged_attention(const AttentionBatch& batch, const KvLayerView& cache, ThreadPool& pool);

// Single-threaded float64 reference with a full softmax per query, for tests.
void paged_attention_reference(const AttentionBatch& batch, const KvLayerView& cache);

}  // namespace folio::cpu
