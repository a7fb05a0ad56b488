// The decode kernel's per-format entry points (attention_decode_kernel.cuh, instantiated in
// attention_decode_fp16.cu, attention_decode_quantized.cu and attention_decode_kivi.cu) and
// the one helper the dispatcher shares with them.
#pragma once

#include <cstdint>

#include "backend/cuda/kernels/kernels.h"

namespace folio::cuda::decode {

// Launches the split-KV decode kernel for a cache of format kFormat (head_dim 64 or 128), the
// query group per CTA chosen from the GQA ratio; partials go to the workspace when
// grid_splits > 1.
template <KvFormat kFormat>
void launch_decode_kernels(const PagedAttentionArgs& args, DecodeSplitPolicy policy, int32_t grid_splits,
                           float* partial_out, float2* partial_stats, Stream stream);

// The tensor-core decode kernels: attention_decode_tc_direct.cu for fp16, fp8 and int8,
// attention_decode_tc_kivi.cu for kivi4 and kivi2. Each CTA walks one or more of a row's splits
// (DecodeWalk); they return true when every row's splits were combined in its CTA, so no reduce
// kernel is needed.
template <KvFormat kFormat>
bool launch_decode_tc_direct(const PagedAttentionArgs& args, DecodeSplitPolicy policy, int32_t grid_splits,
                             float* partial_out, float2* partial_stats, Stream stream);
template <KvFormat kFormat>
bool launch_decode_tc_kivi(const PagedAttentionArgs& args, DecodeSplitPolicy policy, int32_t grid_splits,
                           float* partial_out, float2* partial_stats, Stream stream);

// The largest divisor of group_size that is at most `most` (1 when none is larger).
inline int largest_group_tile(int group_size, int most) {
  for (int g = most; g > 1; --g) {
    if (group_size % g == 0) return g;
  }
  return 1;
}

}  // namespace folio::cuda::decode
