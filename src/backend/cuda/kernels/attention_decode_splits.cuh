// How a decode row's split partials become its output: shared by the reduce kernel
// (attention_decode.cu) and the tensor-core decode CTAs that walk all of a row's splits
// (attention_decode_tc_common.cuh), which must give the same bits (batch invariance: the walk
// depends on the batch, the split plan does not).
#pragma once

#include <cmath>
#include <cstddef>

namespace folio::cuda::decode {

// Output value d of the row whose partials start at `base` (split s at base + s): each split's
// normalized partial weighted by l_s 2^(m_s - M), M the largest max. Every rounding is spelled
// out (no multiply-add the compiler may fuse in one caller and not the other).
template <int kHeadDim>
__device__ __forceinline__ float combine_splits(const float* partial_out, const float2* partial_stats, size_t base,
                                                int num_splits, int d) {
  float global_max = -INFINITY;
  for (int s = 0; s < num_splits; ++s) global_max = fmaxf(global_max, partial_stats[base + s].x);
  float weight_sum = 0.0f;
  float value = 0.0f;
  for (int s = 0; s < num_splits; ++s) {
    const float2 stats = partial_stats[base + s];
    const float w = __fmul_rn(stats.y, exp2f(stats.x - global_max));
    weight_sum = __fadd_rn(weight_sum, w);
    value = __fmaf_rn(w, partial_out[(base + s) * kHeadDim + d], value);
  }
  return __fdiv_rn(value, weight_sum);
}

}  // namespace folio::cuda::decode
