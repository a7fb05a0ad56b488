// The obviously-correct paged attention: one warp per (query token, head), keys visited one
// at a time in position order, each lane holding head_dim / 32 dims of q and of the output.
// The dot product is a warp sum, the softmax a scalar online softmax with expf. No shared
// memory, no tiling, no tensor cores: a second opinion for the checker, and the fallback for
// what the fast kernels lack (sliding windows, head_dim 256).
#include <cassert>
#include <cmath>

#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/kernels/kernels.h"

namespace folio::cuda {
namespace {

using namespace detail;

constexpr int kReferenceWarpsPerBlock = 4;

template <int kDimsPerLane>
__global__ void reference_kernel(const PagedAttentionArgs args) {
  const int warp_global = blockIdx.x * kReferenceWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (warp_global >= args.num_tokens * args.num_heads) return;
  const int token = warp_global / args.num_heads;
  const int head = warp_global % args.num_heads;
  const KvLayerView& cache = args.cache;
  const int head_dim = cache.head_dim;

  // The sequence holding this token: the last s with cu_query_starts[s] <= token.
  int lo = 0;
  int hi = args.num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (args.cu_query_starts[mid] <= token)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int seq = lo;
  const int query_start = args.cu_query_starts[seq];
  const int query_len = args.cu_query_starts[seq + 1] - query_start;
  const int context_len = args.context_lens[seq];
  const int position = context_len - query_len + (token - query_start);
  const int kv_head = head / (args.num_heads / cache.num_kv_heads);
  const int32_t* block_table = args.block_tables + static_cast<size_t>(seq) * args.max_blocks_per_seq;
  const size_t token_stride = static_cast<size_t>(cache.num_kv_heads) * head_dim;

  float q[kDimsPerLane];
  float acc[kDimsPerLane];
  const uint16_t* q_row = args.q + (static_cast<size_t>(token) * args.num_heads + head) * head_dim;
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) {
    q[i] = half_bits_to_float(q_row[lane + 32 * i]);
    acc[i] = 0.0f;
  }
  float running_max = -INFINITY;
  float running_sum = 0.0f;
  const int first_key = args.window > 0 ? max(0, position - args.window + 1) : 0;
  for (int key = first_key; key <= position; ++key) {
    const int block = block_table[key / cache.block_size];
    const size_t slot = static_cast<size_t>(block) * cache.block_size + key % cache.block_size;
    const size_t base = slot * token_stride + static_cast<size_t>(kv_head) * head_dim;
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) dot += q[i] * half_bits_to_float(cache.fp16_keys()[base + lane + 32 * i]);
    const float score = warp_sum(dot) * args.scale;
    const float new_max = fmaxf(running_max, score);
    const float alpha = expf(running_max - new_max);
    const float p = expf(score - new_max);
    running_sum = running_sum * alpha + p;
    running_max = new_max;
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) {
      acc[i] = acc[i] * alpha + p * half_bits_to_float(cache.fp16_values()[base + lane + 32 * i]);
    }
  }
  uint16_t* out_row = args.out + (static_cast<size_t>(token) * args.num_heads + head) * head_dim;
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) out_row[lane + 32 * i] = float_to_bf16_bits(acc[i] / running_sum);
}

}  // namespace

void paged_attention_reference(const PagedAttentionArgs& args, Stream stream) {
  const int head_dim = args.cache.head_dim;
  assert(head_dim % 32 == 0 && head_dim <= 256);
  assert(args.num_heads % args.cache.num_kv_heads == 0);
  assert(args.cache.format == KvFormat::kFp16);  // checks of quantized caches use the CPU reference
  const int64_t warps = static_cast<int64_t>(args.num_tokens) * args.num_heads;
  if (warps == 0) return;
  const int blocks = static_cast<int>((warps + kReferenceWarpsPerBlock - 1) / kReferenceWarpsPerBlock);
  const int threads = 32 * kReferenceWarpsPerBlock;
  switch (head_dim / 32) {
    case 1: reference_kernel<1><<<blocks, threads, 0, stream>>>(args); break;
    case 2: reference_kernel<2><<<blocks, threads, 0, stream>>>(args); break;
    case 3: reference_kernel<3><<<blocks, threads, 0, stream>>>(args); break;
    case 4: reference_kernel<4><<<blocks, threads, 0, stream>>>(args); break;
    case 5: reference_kernel<5><<<blocks, threads, 0, stream>>>(args); break;
    case 6: reference_kernel<6><<<blocks, threads, 0, stream>>>(args); break;
    case 7: reference_kernel<7><<<blocks, threads, 0, stream>>>(args); break;
    default: reference_kernel<8><<<blocks, threads, 0, stream>>>(args); break;
  }
}

}  // namespace folio::cuda
