// What the prefill attention kernels share: the K/V tile width, the swizzled shared-memory
// layout of [rows][head_dim] fp16 tiles, and the launchers of the kernels that live in their
// own files (attention_prefill.cu holds the dispatcher, paged_attention_prefill).
#pragma once

#include "backend/cuda/kernels/kernels.h"

namespace folio::cuda::prefill {

inline constexpr int kBlockN = 64;  // keys per K/V tile

// Offset in halfs of chunk `chunk` of row `row` in a swizzled [rows][kHeadDim] tile: 16-byte
// chunk c of row r lives at chunk c ^ (r % 8), so the eight row addresses of every ldmatrix
// phase hit eight different 16-byte bank groups.
template <int kHeadDim>
__device__ __forceinline__ int swizzled(int row, int chunk) {
  return row * kHeadDim + ((chunk ^ (row & 7)) << 3);
}

// The 64-row kernel (attention_prefill_rows64.cu), the one every quantized format uses.
void launch_prefill_rows64(const PagedAttentionArgs& args, bool skip_single_query, Stream stream);
// The 128-row kernel (attention_prefill_rows128.cu), fp16 caches only.
void launch_prefill_rows128(const PagedAttentionArgs& args, bool skip_single_query, Stream stream);
// The warp-specialized wgmma kernel (attention_prefill_wgmma.cu): Hopper, head_dim 128, fp16
// caches; supported says whether args and the device are those.
bool prefill_wgmma_supported(const PagedAttentionArgs& args);
void launch_prefill_wgmma(const PagedAttentionArgs& args, bool skip_single_query, Stream stream);

}  // namespace folio::cuda::prefill
