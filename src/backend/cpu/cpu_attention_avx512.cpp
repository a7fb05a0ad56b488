// The attention tile kernel compiled for AVX-512 (this file gets -mavx512f and friends);
// cpu_attention.cpp calls it only on CPUs that have AVX-512.
// GCC 12 reports its own intrinsics' _mm512_undefined_*() placeholders as used uninitialized
// once inlined (_mm512_reduce_max_ps); the warning is about the header.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "backend/cpu/cpu_attention.h"
#include "backend/cpu/vector_exp_avx512.h"
#include "core/fp16_rows.h"
#include "kv/kivi.h"
#include "kv/kv_quant.h"

namespace folio::cpu {

#include "backend/cpu/cpu_attention_tile.inc"

void attend_tile_avx512(const AttentionBatch& batch, const KvLayerView& cache, const TileWork& item, float* scratch) {
  attend_tile_impl(batch, cache, item, scratch);
}

void merge_tile_chunks_avx512(const AttentionBatch& batch, const KvLayerView& cache, const TileWork& item,
                              const float* partials, float* total) {
  merge_tile_chunks_impl(batch, cache, item, partials, total);
}

}  // namespace folio::cpu
