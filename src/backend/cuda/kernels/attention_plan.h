// Host-side planning for the CUDA attention kernels: how many KV splits a decode launch uses
// and how much scratch that needs. Pure C++ (compiled into folio_lib too), so CI tests it.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define FOLIO_HOST_DEVICE __host__ __device__
#else
#define FOLIO_HOST_DEVICE
#endif

namespace folio::cuda {

// Decode CTAs stream the context in tiles of this many tokens; splits are cut on tile edges.
inline constexpr int32_t kDecodeTileTokens = 64;
// A split covers at least this many tiles, so that the partial results and the reduce stay
// small next to the K/V bytes a split reads.
inline constexpr int32_t kMinTilesPerSplit = 4;
inline constexpr int32_t kMaxDecodeSplits = 128;
// Decode CTAs wanted per multiprocessor: enough resident CTAs that each SM keeps several
// tiles of loads in flight (bandwidth needs ~30 KB in flight per SM on an H200).
inline constexpr int32_t kDecodeCtasPerSm = 4;

// Number of KV splits for a decode launch over num_seqs sequences whose longest context is
// max_context_len: 1 when the (sequence, kv head) CTAs already fill the GPU, more when they
// don't (batch 1 at 32k: 8 kv heads x 50 splits), never so many that a split gets fewer than
// kMinTilesPerSplit tiles. Depends only on host-known maxima, so CUDA graphs can bake it in.
int32_t plan_decode_splits(int32_t num_seqs, int32_t num_kv_heads, int32_t max_context_len,
                           int32_t sm_count);

// Tokens per split for one sequence: its context cut into num_splits tile-aligned chunks
// (trailing splits may be empty). The kernels compute the same thing on the device.
FOLIO_HOST_DEVICE inline int32_t decode_split_tokens(int32_t context_len, int32_t num_splits) {
  const int32_t tiles = (context_len + kDecodeTileTokens - 1) / kDecodeTileTokens;
  const int32_t tiles_per_split = (tiles + num_splits - 1) / num_splits;
  return tiles_per_split * kDecodeTileTokens;
}

// Byte layout of the split-KV scratch: partial outputs then (max, sum) pairs, each region
// 256-byte aligned.
struct DecodeWorkspaceLayout {
  size_t partial_out_offset = 0;  // float (num_seqs, num_heads, num_splits, head_dim)
  size_t partial_stats_offset = 0;  // float2 (num_seqs, num_heads, num_splits): (max, sum)
  size_t total_bytes = 0;
};
DecodeWorkspaceLayout decode_workspace_layout(int32_t num_seqs, int32_t num_heads,
                                              int32_t head_dim, int32_t num_splits);

// Bytes of workspace that cover every paged_attention call with num_seqs <= max_num_seqs
// and max_context_len <= the given one (the split count is largest for few sequences, the
// partial arrays for many, so this takes the maximum over all sequence counts).
size_t attention_workspace_bytes(int32_t max_num_seqs, int32_t num_heads, int32_t num_kv_heads,
                                 int32_t head_dim, int32_t max_context_len, int32_t sm_count);

}  // namespace folio::cuda
