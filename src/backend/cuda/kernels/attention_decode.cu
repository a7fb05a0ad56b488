// Paged decode attention: the dispatcher (format -> the kernel's instantiation, split-KV
// workspace, the reduce of the splits) and paged_attention, which sends each sequence to the
// prefill or the decode kernel. The kernel and its design are attention_decode_kernel.cuh.
#include <cassert>
#include <cmath>

#include "backend/cuda/kernels/attention_decode_launch.h"
#include "backend/cuda/kernels/attention_decode_splits.cuh"
#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/kernels/kernels.h"
#include "backend/cuda/programmatic_launch.cuh"

namespace folio::cuda {
namespace {

// Combines the splits of one (sequence, head): weights l_i * 2^(m_i - M), M the largest max.
// Sequences with one split (their output is written) and prefill rows exit at once.
template <int kHeadDim>
__global__ void __launch_bounds__(kHeadDim)
    decode_reduce_kernel(const PagedAttentionArgs args, DecodeSplitPolicy policy, int32_t grid_splits,
                         const float* partial_out, const float2* partial_stats) {
  let_next_kernel_start();  // the output projection after it prefetches its weights meanwhile
  const int head = blockIdx.x;
  const int seq = blockIdx.y;
  const int d = threadIdx.x;
  const int token = args.cu_query_starts[seq];
  if (args.cu_query_starts[seq + 1] - token != 1) return;
  const int num_splits = decode_num_splits(args.context_lens[seq], policy);
  if (num_splits <= 1) return;
  const size_t base = (static_cast<size_t>(seq) * args.num_heads + head) * grid_splits;
  args.out[(static_cast<size_t>(token) * args.num_heads + head) * kHeadDim + d] =
      detail::float_to_bf16_bits(decode::combine_splits<kHeadDim>(partial_out, partial_stats, base, num_splits, d));
}

// Returns whether the kernel combined every row's splits itself (no reduce kernel needed).
bool launch_decode(const PagedAttentionArgs& args, DecodeSplitPolicy policy, int32_t grid_splits, float* partial_out,
                   float2* partial_stats, Stream stream, DecodeKernel kernel) {
  using decode::launch_decode_kernels;
  using decode::launch_decode_tc_direct;
  using decode::launch_decode_tc_kivi;
  if (kernel == DecodeKernel::kDefault) {
    switch (args.cache.format) {
      case KvFormat::kFp8E4M3:
        return launch_decode_tc_direct<KvFormat::kFp8E4M3>(args, policy, grid_splits, partial_out, partial_stats,
                                                           stream);
      case KvFormat::kInt8:
        return launch_decode_tc_direct<KvFormat::kInt8>(args, policy, grid_splits, partial_out, partial_stats, stream);
      case KvFormat::kKivi4:
        return launch_decode_tc_kivi<KvFormat::kKivi4>(args, policy, grid_splits, partial_out, partial_stats, stream);
      case KvFormat::kKivi2:
        return launch_decode_tc_kivi<KvFormat::kKivi2>(args, policy, grid_splits, partial_out, partial_stats, stream);
      case KvFormat::kFp16:
        return launch_decode_tc_direct<KvFormat::kFp16>(args, policy, grid_splits, partial_out, partial_stats, stream);
      case KvFormat::kBf16: break;  // the CUDA-core kernel (an fp16 MMA would need bf16 converted)
    }
  }
  switch (args.cache.format) {
    case KvFormat::kFp16:
      launch_decode_kernels<KvFormat::kFp16>(args, policy, grid_splits, partial_out, partial_stats, stream);
      return false;
    case KvFormat::kBf16:
      launch_decode_kernels<KvFormat::kBf16>(args, policy, grid_splits, partial_out, partial_stats, stream);
      return false;
    case KvFormat::kFp8E4M3:  // its residual (the query's own block, staged) is read by the tensor-core kernel only
      return launch_decode_tc_direct<KvFormat::kFp8E4M3>(args, policy, grid_splits, partial_out, partial_stats, stream);
    case KvFormat::kInt8:
      launch_decode_kernels<KvFormat::kInt8>(args, policy, grid_splits, partial_out, partial_stats, stream);
      return false;
    case KvFormat::kKivi4:
      launch_decode_kernels<KvFormat::kKivi4>(args, policy, grid_splits, partial_out, partial_stats, stream);
      return false;
    case KvFormat::kKivi2:
      launch_decode_kernels<KvFormat::kKivi2>(args, policy, grid_splits, partial_out, partial_stats, stream);
      return false;
  }
  return false;
}

}  // namespace

void paged_attention_decode_policy(const PagedAttentionArgs& args, Workspace workspace, DecodeSplitPolicy policy,
                                   Stream stream, DecodeKernel kernel) {
  const int head_dim = args.cache.head_dim;
  assert(head_dim == 64 || head_dim == 128);
  assert(args.num_heads % args.cache.num_kv_heads == 0);
  assert(policy.min_split_tokens > 0 && policy.min_split_tokens % kDecodeTileTokens == 0);
  assert(!kv_format_has_residual(args.cache.format) || args.slot_mapping != nullptr);
  if (args.num_seqs == 0) return;
  const int32_t grid_splits = decode_grid_splits(args.max_context_len, policy);
  float* partial_out = nullptr;
  float2* partial_stats = nullptr;
  if (grid_splits > 1) {
    const DecodeWorkspaceLayout layout = decode_workspace_layout(args.num_seqs, args.num_heads, head_dim, grid_splits);
    assert(workspace.ptr != nullptr && workspace.bytes >= layout.total_bytes);
    auto* base = static_cast<unsigned char*>(workspace.ptr);
    partial_out = reinterpret_cast<float*>(base + layout.partial_out_offset);
    partial_stats = reinterpret_cast<float2*>(base + layout.partial_stats_offset);
  }
  const bool combined = launch_decode(args, policy, grid_splits, partial_out, partial_stats, stream, kernel);
  if (grid_splits > 1 && !combined) {
    const dim3 grid(args.num_heads, args.num_seqs);
    if (head_dim == 64) {
      decode_reduce_kernel<64><<<grid, 64, 0, stream>>>(args, policy, grid_splits, partial_out, partial_stats);
    } else {
      decode_reduce_kernel<128><<<grid, 128, 0, stream>>>(args, policy, grid_splits, partial_out, partial_stats);
    }
  }
}

void paged_attention_decode(const PagedAttentionArgs& args, Workspace workspace, int32_t sm_count, Stream stream) {
  (void)sm_count;  // the split plan depends on each sequence's context alone
  paged_attention_decode_policy(args, workspace, DecodeSplitPolicy{}, stream);
}

void paged_attention(const PagedAttentionArgs& args, Workspace workspace, int32_t sm_count, Stream stream) {
  // The fast kernels know neither windows nor head_dim 256 yet: one warp per (token, head).
  if (args.window > 0 || (args.cache.head_dim != 64 && args.cache.head_dim != 128)) {
    paged_attention_reference(args, stream);
    return;
  }
  if (args.max_query_len <= 1) {
    paged_attention_decode(args, workspace, sm_count, stream);
    return;
  }
  // Mixed: the prefill kernel serves the sequences with query_len > 1 and the decode kernel
  // those with query_len == 1, so a decode row rounds the same way in every batch. When a
  // single-token sequence cannot exist (every other sequence would have to hold more than
  // max_query_len tokens), the decode launch is skipped.
  paged_attention_prefill(args, stream, PrefillRows::kMultiTokenOnly, engine_prefill_kernel());
  const int64_t most_tokens_with_a_decode_row = 1 + static_cast<int64_t>(args.num_seqs - 1) * args.max_query_len;
  if (args.num_tokens <= most_tokens_with_a_decode_row) {
    paged_attention_decode(args, workspace, sm_count, stream);
  }
}

}  // namespace folio::cuda
