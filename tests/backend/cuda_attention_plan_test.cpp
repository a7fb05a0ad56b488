// Host-side planning of the CUDA attention kernels (split counts, workspace sizes): pure C++,
// so the CPU CI covers it even though the kernels themselves need a GPU.
#include <gtest/gtest.h>

#include "backend/cuda/kernels/attention_plan.h"

namespace folio::cuda {
namespace {

constexpr int32_t kH200Sms = 132;

TEST(CudaAttentionPlan, OneSplitWhenSequencesFillTheGpu) {
  EXPECT_EQ(plan_decode_splits(256, 8, 4096, kH200Sms), 1);
  EXPECT_EQ(plan_decode_splits(66, 8, 32768, kH200Sms), 1);  // 528 CTAs = 4 per SM already
}

TEST(CudaAttentionPlan, ManySplitsForOneLongSequence) {
  const int32_t splits = plan_decode_splits(1, 8, 32768, kH200Sms);
  EXPECT_GE(splits * 8, kDecodeCtasPerSm * kH200Sms);  // fills the GPU
  EXPECT_LE(splits, kMaxDecodeSplits);
  // Every split still gets at least kMinTilesPerSplit tiles.
  EXPECT_GE(decode_split_tokens(32768, splits), kMinTilesPerSplit * kDecodeTileTokens);
}

TEST(CudaAttentionPlan, ShortContextsAreNotSplitBelowTheMinimum) {
  EXPECT_EQ(plan_decode_splits(1, 8, 100, kH200Sms), 1);
  EXPECT_EQ(plan_decode_splits(1, 8, kMinTilesPerSplit * kDecodeTileTokens * 3, kH200Sms), 3);
  EXPECT_EQ(plan_decode_splits(0, 8, 4096, kH200Sms), 1);
}

TEST(CudaAttentionPlan, SplitTokensCoverTheContextOnTileEdges) {
  for (int32_t context : {1, 63, 64, 65, 1000, 4096, 32768, 32769}) {
    for (int32_t splits : {1, 2, 3, 7, 50, 128}) {
      const int32_t per_split = decode_split_tokens(context, splits);
      EXPECT_EQ(per_split % kDecodeTileTokens, 0);
      EXPECT_GE(static_cast<int64_t>(per_split) * splits, context);
      // The chunks are as small as tile alignment allows: one tile less would not cover it.
      if (per_split > kDecodeTileTokens) {
        EXPECT_LT(static_cast<int64_t>(per_split - kDecodeTileTokens) * splits, context);
      }
    }
  }
}

TEST(CudaAttentionPlan, WorkspaceLayoutIsAlignedAndLargeEnough) {
  const DecodeWorkspaceLayout layout = decode_workspace_layout(3, 32, 128, 5);
  EXPECT_EQ(layout.partial_stats_offset % 256, 0u);
  EXPECT_GE(layout.partial_stats_offset, 3u * 32 * 5 * 128 * sizeof(float));
  EXPECT_GE(layout.total_bytes, layout.partial_stats_offset + 3u * 32 * 5 * 2 * sizeof(float));
}

TEST(CudaAttentionPlan, WorkspaceCoversEveryBatchSize) {
  const size_t bytes = attention_workspace_bytes(256, 32, 8, 128, 32768, kH200Sms);
  for (int32_t seqs = 1; seqs <= 256; ++seqs) {
    const int32_t splits = plan_decode_splits(seqs, 8, 32768, kH200Sms);
    if (splits > 1) {
      EXPECT_LE(decode_workspace_layout(seqs, 32, 128, splits).total_bytes, bytes);
    }
  }
  EXPECT_EQ(attention_workspace_bytes(256, 32, 8, 128, 64, kH200Sms), 0u);  // never split
}

}  // namespace
}  // namespace folio::cuda
