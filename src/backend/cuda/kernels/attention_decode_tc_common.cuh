// What the two tensor-core decode kernels share (attention_decode_tc_direct.cu for fp16, fp8
// and int8; attention_decode_tc_kivi.cu for KIVI): the CTA's shape and the merge of its 4 warps'
// partial results at the end.
//
// Both give each of the CTA's 4 warps its own 16 keys of every 64-key tile, so the tile loop
// needs no CTA-wide barrier; the warps' (max, sum, O) are merged once, through shared memory,
// after the loop.
#pragma once

#include <cmath>

#include "backend/cuda/kernels/attention_plan.h"
#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/kernels/kernels.h"

namespace folio::cuda::decode::tc {

inline constexpr int kThreads = 128;
inline constexpr int kWarps = kThreads / 32;
inline constexpr int kTile = kDecodeTileTokens;  // 64 keys a tile, 16 per warp
inline constexpr int kWarpKeys = kTile / kWarps;
inline constexpr int kRows = 16;  // query heads per CTA at most (the MMA's M)

// d = the 8x8 b16 matrix whose fragment a is, transposed (fragments: thread (g, q) holds row g,
// columns 2q and 2q + 1).
__device__ __forceinline__ uint32_t transpose8x8(uint32_t a) {
  uint32_t d;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
  return d;
}

// Bytes the merge needs: each warp's O rows and (max, sum) per row.
template <int kHeadDim>
inline constexpr size_t kMergeBytes = static_cast<size_t>(kWarps) * kRows*(kHeadDim + 2) * sizeof(float);

// Where the CTA's output goes: bf16 rows of args.out when the sequence has one split, else a
// normalized partial and its (max, sum) for the reduce kernel.
struct DecodeOutput {
  int token = 0;
  int head0 = 0;
  int rows = 0;
  int num_splits = 1;
  int grid_splits = 1;
  size_t partial_index = 0;
};

// The merge buffers (kMergeBytes<kHeadDim> at the start of shared memory, free once every warp
// has left its tile loop): each warp's unnormalized O rows [warp][row][head_dim], then its
// (max, sum) per row [warp][row]. A warp with no keys in its split leaves max = -inf.
template <int kHeadDim>
__device__ __forceinline__ float* merge_values(unsigned char* smem) {
  return reinterpret_cast<float*>(smem);
}
template <int kHeadDim>
__device__ __forceinline__ float2* merge_stats(unsigned char* smem) {
  return reinterpret_cast<float2*>(smem + static_cast<size_t>(kWarps) * kRows * kHeadDim * sizeof(float));
}

// After each warp has written its rows to the merge buffers (and a __syncthreads): combines the
// 4 warps and writes the CTA's rows.
template <int kHeadDim>
__device__ __forceinline__ void finish_merge(unsigned char* smem, const PagedAttentionArgs& args,
                                             const DecodeOutput& out, float* partial_out, float2* partial_stats) {
  const float* merge_o = merge_values<kHeadDim>(smem);
  const float2* stats = merge_stats<kHeadDim>(smem);
  for (int i = threadIdx.x; i < out.rows * kHeadDim; i += kThreads) {
    const int row = i / kHeadDim;
    const int d = i % kHeadDim;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, stats[w * kRows + row].x);
    float l = 0.0f, value = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float2 ws = stats[w * kRows + row];
      if (ws.x == -INFINITY) continue;  // a warp with no keys in this split
      const float weight = exp2f(ws.x - m);
      l = fmaf(ws.y, weight, l);
      value = fmaf(merge_o[(w * kRows + row) * kHeadDim + d], weight, value);
    }
    const size_t slot = out.partial_index + static_cast<size_t>(row) * out.grid_splits;
    if (out.num_splits == 1) {
      args.out[(static_cast<size_t>(out.token) * args.num_heads + out.head0 + row) * kHeadDim + d] =
          detail::float_to_bf16_bits(value / l);
    } else {
      partial_out[slot * kHeadDim + d] = value / l;
      if (d == 0) partial_stats[slot] = make_float2(m, l);
    }
  }
}

}  // namespace folio::cuda::decode::tc
