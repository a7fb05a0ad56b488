// The batch sizes decode graphs are captured for. A decode step of n sequences replays the
// graph of the smallest bucket >= n, padding the rest; a padded row costs a full row of every
// GEMM, and past ~64 rows a decode GEMM is compute-bound on an H200, so large buckets must be
// close together: powers of two up to 32, then every multiple of 32 (at most 31 padded rows,
// under 10% from 320 sequences). vLLM's capture list is similar (1, 2, 4, then steps of 8).
#pragma once

#include <cstdint>

namespace folio {

inline constexpr int32_t kDecodeGraphStep = 32;

constexpr int32_t decode_graph_bucket(int32_t num_seqs) {
  if (num_seqs <= 1) return 1;
  if (num_seqs <= kDecodeGraphStep) {
    int32_t p = 1;
    while (p < num_seqs) p *= 2;
    return p;
  }
  return (num_seqs + kDecodeGraphStep - 1) / kDecodeGraphStep * kDecodeGraphStep;
}

}  // namespace folio
