// How a decode row's split partials become its output: shared by the reduce kernel
// (attention_decode.cu) and the tensor-core decode CTAs that walk all of a row's splits
// (attention_decode_tc_common.cuh), which must give the same bits (batch invariance: the walk
// depends on the batch, the split plan does not).
//
// The splits are folded left to right, so a CTA that walks them can fold each split as it ends,
// keeping a running (max, sum, output) in shared memory instead of writing partials and reading
// them back (H100, kivi2 b64 x 4k: the write and the read-back cost ~6% of the kernel). Every
// rounding is spelled out (no multiply-add the compiler may fuse in one caller and not another).
#pragma once

#include <cmath>
#include <cstddef>

namespace folio::cuda::decode {

// A row's running fold: max, and sum of exp2(score - max) over the splits folded so far.
struct SplitFold {
  float max = -INFINITY;
  float sum = 0.0f;
};
// The factors of one fold step: running values scale by `keep`, the split's normalized output by
// `weight` (its sum, rescaled to the new max).
struct SplitFoldStep {
  float keep = 0.0f;
  float weight = 0.0f;
};

// Folds split (m, l) into `fold`; returns the factors its values fold with. The first split
// (fold.max = -inf) gets keep = 0.
__device__ __forceinline__ SplitFoldStep fold_split_stats(SplitFold& fold, float m, float l) {
  const float new_max = fmaxf(fold.max, m);
  SplitFoldStep step;
  step.keep = exp2f(fold.max - new_max);
  step.weight = __fmul_rn(l, exp2f(m - new_max));
  fold.sum = __fadd_rn(__fmul_rn(fold.sum, step.keep), step.weight);
  fold.max = new_max;
  return step;
}
// A running output value folded with one split's normalized value.
__device__ __forceinline__ float fold_split_value(float running, const SplitFoldStep& step, float value) {
  return __fadd_rn(__fmul_rn(running, step.keep), __fmul_rn(step.weight, value));
}

// Output value d of the row whose partials start at `base` (split s at base + s).
template <int kHeadDim>
__device__ __forceinline__ float combine_splits(const float* partial_out, const float2* partial_stats, size_t base,
                                                int num_splits, int d) {
  SplitFold fold;
  float value = 0.0f;
  for (int s = 0; s < num_splits; ++s) {
    const float2 stats = partial_stats[base + s];
    const SplitFoldStep step = fold_split_stats(fold, stats.x, stats.y);
    value = fold_split_value(value, step, partial_out[(base + s) * kHeadDim + d]);
  }
  return __fdiv_rn(value, fold.sum);
}

}  // namespace folio::cuda::decode
