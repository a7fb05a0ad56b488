// What the two tensor-core decode kernels share (attention_decode_tc_direct.cu for fp16, fp8
// and int8; attention_decode_tc_kivi.cu for KIVI): the CTA's shape and the merge of its 4 warps'
// partial results at the end.
//
// Both give each of the CTA's 4 warps its own 16 keys of every 64-key tile, so the tile loop
// needs no CTA-wide barrier; the warps' (max, sum, O) are merged once a split, through shared
// memory, after the loop. A CTA walks one or more consecutive splits of its row (DecodeWalk in
// attention_plan.h) and, when it walked them all, combines them itself.
#pragma once

#include <cmath>

#include "backend/cuda/kernels/attention_decode_splits.cuh"
#include "backend/cuda/kernels/attention_plan.h"
#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/kernels/kernels.h"

namespace folio::cuda::decode::tc {

inline constexpr int kThreads = 128;
inline constexpr int kWarps = kThreads / 32;
inline constexpr int kTile = kDecodeTileTokens;  // 64 keys a tile, 16 per warp
inline constexpr int kWarpKeys = kTile / kWarps;
inline constexpr int kRows = 8;  // query heads per CTA at most (the MMA's N)

// d = the 8x8 b16 matrix whose fragment a is, transposed (fragments: thread (g, q) holds row g,
// columns 2q and 2q + 1).
__device__ __forceinline__ uint32_t transpose8x8(uint32_t a) {
  uint32_t d;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
  return d;
}

// Bytes the merge of `rows` query heads needs: each warp's O rows and (max, sum) per row.
template <int kHeadDim>
__host__ __device__ constexpr size_t merge_bytes(int rows) {
  return static_cast<size_t>(kWarps) * rows * (kHeadDim + 2) * sizeof(float);
}
template <int kHeadDim>
inline constexpr size_t kMergeBytes = merge_bytes<kHeadDim>(kRows);  // the most
// Bytes of a walking CTA's running fold of its row's splits (finish_merge's `fold`): per row a
// SplitFold and this split's SplitFoldStep, then the running output [rows][head_dim].
template <int kHeadDim>
__host__ __device__ constexpr size_t fold_bytes(int rows) {
  return static_cast<size_t>(rows) * (sizeof(SplitFold) + sizeof(SplitFoldStep) + kHeadDim * sizeof(float));
}

// Where a split's output goes: bf16 rows of args.out when the sequence has one split, else a
// normalized partial and its (max, sum) for combine_splits, row r of split s at
// row_base + r grid_splits + s (or, in a CTA folding its whole row, finish_merge's running fold).
struct DecodeOutput {
  int token = 0;
  int head0 = 0;
  int rows = 0;
  int num_splits = 1;
  int grid_splits = 1;
  int split = 0;
  size_t row_base = 0;
  __device__ __forceinline__ size_t partial_index(int row) const {
    return row_base + static_cast<size_t>(row) * grid_splits + split;
  }
};
__device__ __forceinline__ DecodeOutput decode_output(const PagedAttentionArgs& args, int seq, int token, int head0,
                                                      int rows, int num_splits, int grid_splits) {
  DecodeOutput out;
  out.token = token;
  out.head0 = head0;
  out.rows = rows;
  out.num_splits = num_splits;
  out.grid_splits = grid_splits;
  out.row_base = (static_cast<size_t>(seq) * args.num_heads + head0) * grid_splits;
  return out;
}

// The splits [first, last) this CTA walks (blockIdx.x of a grid ctas_per_row wide); empty when
// the sequence has fewer splits than the launch's widest.
struct SplitRange {
  int first = 0;
  int last = 0;
};
__device__ __forceinline__ SplitRange walked_splits(int splits_per_cta, int num_splits) {
  SplitRange r;
  r.first = static_cast<int>(blockIdx.x) * splits_per_cta;
  r.last = min(num_splits, r.first + splits_per_cta);
  return r;
}

// After a CTA walked all of its row's splits (and each wrote its partial): the combined rows,
// with the reduce kernel's arithmetic (combine_splits), so the bits match a launch where other
// CTAs had the splits. (The KIVI kernel folds as it goes instead: finish_merge's `fold`.)
template <int kHeadDim>
__device__ __forceinline__ void combine_walked_splits(const PagedAttentionArgs& args, const DecodeOutput& out,
                                                      const float* partial_out, const float2* partial_stats) {
  __syncthreads();  // the CTA's global writes before a barrier are visible to all its threads after it
  for (int i = threadIdx.x; i < out.rows * kHeadDim; i += kThreads) {
    const int row = i / kHeadDim;
    const int d = i % kHeadDim;
    const float value = combine_splits<kHeadDim>(
        partial_out, partial_stats, out.row_base + static_cast<size_t>(row) * out.grid_splits, out.num_splits, d);
    args.out[(static_cast<size_t>(out.token) * args.num_heads + out.head0 + row) * kHeadDim + d] =
        detail::float_to_bf16_bits(value);
  }
}

// CTAs the GPU holds at once for a decode kernel (SMs x resident CTAs an SM), asked once per
// instantiation (every GPU of a process is taken to be alike).
template <typename Kernel>
inline int64_t decode_cta_slots(Kernel kernel, size_t smem_bytes) {
  int device = 0, sms = 0, per_sm = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem_bytes);
  return static_cast<int64_t>(sms > 0 ? sms : 1) * (per_sm > 0 ? per_sm : 1);
}

// O^T *= alpha per head (thread (g, q) holds heads 2q and 2q + 1), skipped when no head's max
// moved in the whole warp (alpha == 1 everywhere): the common case once the running max settles,
// and times 1 is exact, so the bits are the same either way.
template <int kMBlocks>
__device__ __forceinline__ void rescale_heads_as_n(float (&o)[kMBlocks][4], const float (&alpha)[2]) {
  if (__all_sync(0xffffffffu, alpha[0] == 1.0f && alpha[1] == 1.0f)) return;
#pragma unroll
  for (int mb = 0; mb < kMBlocks; ++mb) {
    o[mb][0] *= alpha[0];
    o[mb][1] *= alpha[1];
    o[mb][2] *= alpha[0];
    o[mb][3] *= alpha[1];
  }
}

// The merge buffers (merge_bytes(rows) from `merge`, a region the kernel does not need once
// every warp has left its tile loop): each warp's unnormalized O rows [warp][row][head_dim], then
// its (max, sum) per row [warp][row]. A warp with no keys in its split leaves max = -inf.
template <int kHeadDim>
__device__ __forceinline__ float* merge_values(unsigned char* merge) {
  return reinterpret_cast<float*>(merge);
}
template <int kHeadDim>
__device__ __forceinline__ float2* merge_stats(unsigned char* merge, int rows) {
  return reinterpret_cast<float2*>(merge + static_cast<size_t>(kWarps) * rows * kHeadDim * sizeof(float));
}

// After each warp has written its rows to the merge buffers (and a __syncthreads): combines the
// 4 warps and writes the CTA's rows: the output when the sequence has one split; else, with
// `fold` (fold_bytes(rows), a CTA walking all of its row's splits in order), the split folded
// into the running output (the output itself after the last split); else the split's partial. A row's weights 2^(m_w - m) / l are made once, by one thread
// a row, in place of each warp's stats; every output value is then a sum of 4 products (before,
// each of a row's head_dim values redid the 4 exponentials and a division).
template <int kHeadDim>
__device__ __forceinline__ void finish_merge(unsigned char* merge, const PagedAttentionArgs& args,
                                             const DecodeOutput& out, float* partial_out, float2* partial_stats,
                                             unsigned char* fold) {
  const float* merge_o = merge_values<kHeadDim>(merge);
  float2* stats = merge_stats<kHeadDim>(merge, out.rows);
  const int rows = out.rows;
  const bool folding = fold != nullptr && out.num_splits > 1;
  const bool first = out.split == 0;
  const bool last = out.split == out.num_splits - 1;
  auto* row_folds = reinterpret_cast<SplitFold*>(fold);
  auto* row_steps = reinterpret_cast<SplitFoldStep*>(fold + rows * sizeof(SplitFold));
  auto* running = reinterpret_cast<float*>(fold + rows * (sizeof(SplitFold) + sizeof(SplitFoldStep)));
  if (threadIdx.x < rows) {
    const int row = threadIdx.x;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, stats[w * rows + row].x);
    float weight[kWarps];
    float l = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float2 ws = stats[w * rows + row];
      weight[w] = ws.x == -INFINITY ? 0.0f : exp2f(ws.x - m);  // a warp with no keys in this split: 0
      l = fmaf(ws.y, weight[w], l);
    }
#pragma unroll
    for (int w = 0; w < kWarps; ++w) stats[w * rows + row].x = weight[w] / l;
    if (folding) {
      SplitFold f = first ? SplitFold{} : row_folds[row];
      row_steps[row] = fold_split_stats(f, m, l);
      row_folds[row] = f;
    } else if (out.num_splits > 1) {
      partial_stats[out.partial_index(row)] = make_float2(m, l);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < out.rows * kHeadDim; i += kThreads) {
    const int row = i / kHeadDim;
    const int d = i % kHeadDim;
    float value = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w)
      value = fmaf(merge_o[(w * rows + row) * kHeadDim + d], stats[w * rows + row].x, value);
    uint16_t* dst = args.out + (static_cast<size_t>(out.token) * args.num_heads + out.head0 + row) * kHeadDim + d;
    if (out.num_splits == 1) {
      *dst = detail::float_to_bf16_bits(value);
    } else if (folding) {  // each thread keeps to its own i, split after split: no barrier needed
      const float folded = fold_split_value(first ? 0.0f : running[i], row_steps[row], value);
      if (last) {
        *dst = detail::float_to_bf16_bits(__fdiv_rn(folded, row_folds[row].sum));
      } else {
        running[i] = folded;
      }
    } else {
      partial_out[out.partial_index(row) * kHeadDim + d] = value;
    }
  }
}

// The CTA's query rows into shared memory, row-major [kQRows][kHeadDim]: rows [0, rows) are
// heads head0.., the rest zero. Ends with a barrier.
template <int kHeadDim, int kQRows>
__device__ __forceinline__ void load_query_rows(uint16_t* q_smem, const PagedAttentionArgs& args, int token, int head0,
                                                int rows) {
  for (int c = threadIdx.x; c < kQRows * kHeadDim / 8; c += kThreads) {
    const int row = c / (kHeadDim / 8);
    const int chunk = c % (kHeadDim / 8);
    const bool valid = row < rows;
    const uint16_t* src = args.q;
    if (valid) src += (static_cast<size_t>(token) * args.num_heads + head0 + row) * kHeadDim + chunk * 8;
    detail::cp_async_16(q_smem + row * kHeadDim + chunk * 8, src, valid);
  }
  detail::cp_async_commit();
  detail::cp_async_wait<0>();
  __syncthreads();
}

// The end of a kernel with keys as the MMA's M and query heads as its N (thread (g, q) holds
// heads 2q and 2q + 1 of O^T's rows): each thread's (max, sum) per head, summed over the 8
// threads of a column, and its O^T values go to the merge buffers, dim_of(mb, r) naming the
// head dim of m-block mb's row g (r = 0) or g + 8 (r = 1); then the 4 warps are merged and the
// CTA's rows written. Heads past out.rows (the MMA's padding) are not stored. The merge buffers
// are in use until every thread has passed the caller's next barrier.
template <int kHeadDim, typename DimOf>
__device__ __forceinline__ void finish_heads_as_n(unsigned char* merge, const PagedAttentionArgs& args,
                                                  const DecodeOutput& out, const float (&head_max)[2],
                                                  const float (&head_sum)[2], const float (&o)[kHeadDim / 16][4],
                                                  DimOf dim_of, float* partial_out, float2* partial_stats,
                                                  unsigned char* fold = nullptr) {
  const int warp = threadIdx.x / 32;
  const int g = threadIdx.x % 32 / 4;
  const int q = threadIdx.x % 4;
  __syncthreads();  // every warp is done with its slice
  float* merge_o = merge_values<kHeadDim>(merge);
  float2* stats = merge_stats<kHeadDim>(merge, out.rows);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float sum = head_sum[i];
    sum += __shfl_xor_sync(0xffffffffu, sum, 4);
    sum += __shfl_xor_sync(0xffffffffu, sum, 8);
    sum += __shfl_xor_sync(0xffffffffu, sum, 16);
    const int head = 2 * q + i;
    if (head >= out.rows) continue;
    if (g == 0) stats[warp * out.rows + head] = make_float2(head_max[i], sum);
    float* dst = merge_o + (warp * out.rows + head) * kHeadDim;
#pragma unroll
    for (int mb = 0; mb < kHeadDim / 16; ++mb) {
      dst[dim_of(mb, 0)] = o[mb][i];
      dst[dim_of(mb, 1)] = o[mb][2 + i];
    }
  }
  __syncthreads();
  finish_merge<kHeadDim>(merge, args, out, partial_out, partial_stats, fold);
}

}  // namespace folio::cuda::decode::tc
