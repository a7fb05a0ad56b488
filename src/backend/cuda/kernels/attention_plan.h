// Host-side planning for the CUDA attention kernels: how a decode sequence's context is cut
// into KV splits and how much scratch that needs. Pure C++ (compiled into folio_lib too), so
// CI tests it; the split functions are also compiled for the device.
//
// Batch invariance: a sequence's split count is a function of its OWN context length only
// (never of the batch size, the other sequences or the launch's maxima), so its attention
// output is bit-identical whether it runs alone, in a batch of 256 decodes, in a mixed
// prefill+decode batch, or in a CUDA graph captured for a longer maximum context.
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
// A decode sequence is cut into splits of this many tokens (16 tiles): batch 64 at 4k gives
// 4 splits x 8 kv heads x 64 = 2048 CTAs. The tensor-core kernels stream a split faster than
// the CUDA-core one did, so a CTA's fixed costs (Q load, merge, the reduce's partials) weigh
// more: H200, b64 x 4k, 512 -> 1024 tokens: fp16 0.299 -> 0.293 ms, fp8 0.196 -> 0.180 ms,
// and b256 x 1k fp8 (no split left) 0.202 -> 0.174 ms.
inline constexpr int32_t kDecodeSplitTokens = 1024;
// Past kDecodeSplitTokens * kMaxDecodeSplits tokens (40k) the splits grow instead, which
// bounds the workspace (partials are dense in (sequence, head, split)) and keeps a lone long
// sequence in one wave: batch 1 at 64k gives 40 splits of 1,664 tokens x 8 kv heads = 320 CTAs
// (batch 1 at 32k, fp16 on tensor cores: 32 x 1024 tokens 0.0512 ms, 40 x 832 0.0517).
inline constexpr int32_t kMaxDecodeSplits = 40;

// How contexts are cut. The default is what paged_attention uses; checks and benchmarks may
// force other granularities through paged_attention_decode_policy.
struct DecodeSplitPolicy {
  int32_t min_split_tokens = kDecodeSplitTokens;  // multiple of kDecodeTileTokens
  int32_t max_splits = kMaxDecodeSplits;          // >= 1
  // CTAs a (sequence, head group) row's splits are spread over (DecodeWalk); 0: decode_walk
  // chooses from the batch and the GPU. Never changes a bit of the output, only the speed.
  int32_t ctas_per_row = 0;
};

// Tokens per split of a sequence with this context: min_split_tokens, or the tile-aligned
// ceil(context / max_splits) when that is larger.
FOLIO_HOST_DEVICE inline int32_t decode_split_tokens(int32_t context_len, DecodeSplitPolicy policy = {}) {
  const int32_t at_cap = (context_len + policy.max_splits - 1) / policy.max_splits;
  const int32_t at_cap_aligned = (at_cap + kDecodeTileTokens - 1) / kDecodeTileTokens * kDecodeTileTokens;
  return at_cap_aligned > policy.min_split_tokens ? at_cap_aligned : policy.min_split_tokens;
}

// Number of splits of a sequence with this context (>= 1, <= policy.max_splits).
FOLIO_HOST_DEVICE inline int32_t decode_num_splits(int32_t context_len, DecodeSplitPolicy policy = {}) {
  if (context_len <= 0) return 1;
  const int32_t per_split = decode_split_tokens(context_len, policy);
  return (context_len + per_split - 1) / per_split;
}

// Grid width of a decode launch: the most splits any context <= max_context_len can have.
// A CUDA graph captured with a larger max_context_len than the replayed contexts only has
// CTAs that exit at once.
int32_t decode_grid_splits(int32_t max_context_len, DecodeSplitPolicy policy = {});

// How a decode launch spreads each row's splits (a row: one sequence's query heads of one CTA)
// over CTAs: ctas_per_row CTAs, each walking splits_per_cta consecutive splits with its query
// load and set-up done once and the next split's merge in place of a new CTA. The split plan,
// and so every output bit, is the same whatever the walk; a CTA that walks all of a row's
// splits also combines them (no reduce kernel then). Fewer, longer CTAs pay the fixed costs
// (prologue, the query's round trip, the pipeline's first fill, the reduce launch) fewer times:
// one CTA a split left kivi2 at b64 x 4k 15% slower than one split a sequence (H100).
struct DecodeWalk {
  int32_t ctas_per_row = 1;
  int32_t splits_per_cta = 1;
};
// rows: CTA rows of the launch (sequences x head groups); cta_slots: CTAs the GPU holds at once
// (SMs x resident CTAs an SM). Picks the fewest CTAs a row whose waves x splits a CTA is least
// (ceil(rows c / slots) ceil(splits / c)); forced_ctas_per_row > 0 overrides (checks, sweeps).
DecodeWalk decode_walk(int64_t rows, int32_t grid_splits, int64_t cta_slots, int32_t forced_ctas_per_row = 0);

// Byte layout of the split-KV scratch: partial outputs then (max, sum) pairs, each region
// 256-byte aligned.
struct DecodeWorkspaceLayout {
  size_t partial_out_offset = 0;    // float (num_seqs, num_heads, grid_splits, head_dim)
  size_t partial_stats_offset = 0;  // float2 (num_seqs, num_heads, grid_splits): (max, sum)
  size_t total_bytes = 0;
};
DecodeWorkspaceLayout decode_workspace_layout(int32_t num_seqs, int32_t num_heads, int32_t head_dim,
                                              int32_t grid_splits);

// Bytes of workspace that cover every paged_attention call (decode-only or mixed) with
// num_seqs <= max_num_seqs and max_context_len <= the given one; 0 when no context that long
// is ever split. num_kv_heads and sm_count no longer matter (the split count depends on the
// context alone); they stay in the signature for the callers.
size_t attention_workspace_bytes(int32_t max_num_seqs, int32_t num_heads, int32_t num_kv_heads, int32_t head_dim,
                                 int32_t max_context_len, int32_t sm_count);

}  // namespace folio::cuda
