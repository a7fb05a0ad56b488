// Host-side planning of the CUDA attention kernels (split counts, workspace sizes): pure C++,
// so the CPU CI covers it even though the kernels themselves need a GPU.
#include <gtest/gtest.h>

#include "backend/cuda/kernels/attention_plan.h"

namespace folio::cuda {
namespace {

constexpr int32_t kH200Sms = 132;

TEST(CudaAttentionPlan, SplitsFollowTheContextAlone) {
  EXPECT_EQ(decode_num_splits(1), 1);
  EXPECT_EQ(decode_num_splits(kDecodeSplitTokens), 1);
  EXPECT_EQ(decode_num_splits(kDecodeSplitTokens + 1), 2);
  EXPECT_EQ(decode_num_splits(4096), 4096 / kDecodeSplitTokens);
  EXPECT_EQ(decode_num_splits(kDecodeSplitTokens * kMaxDecodeSplits), kMaxDecodeSplits);
  EXPECT_EQ(decode_num_splits(2 * kDecodeSplitTokens * kMaxDecodeSplits), kMaxDecodeSplits);  // splits grow instead
  EXPECT_LE(decode_num_splits(1 << 20), kMaxDecodeSplits);
  EXPECT_EQ(decode_split_tokens(1000), kDecodeSplitTokens);
}

TEST(CudaAttentionPlan, SplitTokensCoverTheContextOnTileEdges) {
  for (const DecodeSplitPolicy policy : {DecodeSplitPolicy{}, DecodeSplitPolicy{64, 1 << 20}, DecodeSplitPolicy{192, 3},
                                         DecodeSplitPolicy{1 << 24, 1}}) {
    for (int32_t context : {1, 63, 64, 65, 1000, 4096, 32768, 32769, 100000, 131072}) {
      const int32_t per_split = decode_split_tokens(context, policy);
      const int32_t splits = decode_num_splits(context, policy);
      EXPECT_EQ(per_split % kDecodeTileTokens, 0);
      EXPECT_GE(per_split, policy.min_split_tokens);
      EXPECT_GE(static_cast<int64_t>(per_split) * splits, context);
      EXPECT_LT(static_cast<int64_t>(per_split) * (splits - 1), context);  // no empty split
      EXPECT_LE(splits, policy.max_splits);
    }
  }
}

TEST(CudaAttentionPlan, GridCoversEveryShorterContext) {
  for (const DecodeSplitPolicy policy :
       {DecodeSplitPolicy{}, DecodeSplitPolicy{64, 1 << 20}, DecodeSplitPolicy{192, 3}}) {
    for (int32_t max_context : {1, 64, 512, 513, 4096, 32768, 40000, 131072}) {
      const int32_t grid = decode_grid_splits(max_context, policy);
      for (int32_t context = 1; context <= max_context; context += 1 + context / 7) {
        EXPECT_LE(decode_num_splits(context, policy), grid) << context << " " << max_context;
      }
      if (static_cast<int64_t>(max_context) <= static_cast<int64_t>(policy.min_split_tokens) * policy.max_splits) {
        EXPECT_EQ(decode_num_splits(max_context, policy), grid);  // exact below the cap
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

TEST(CudaAttentionPlan, WorkspaceCoversEveryBatch) {
  const size_t bytes = attention_workspace_bytes(256, 32, 8, 128, 32768, kH200Sms);
  for (int32_t seqs = 1; seqs <= 256; ++seqs) {
    for (int32_t context : {600, 4096, 32768}) {
      EXPECT_LE(decode_workspace_layout(seqs, 32, 128, decode_grid_splits(context)).total_bytes, bytes);
    }
  }
  EXPECT_EQ(attention_workspace_bytes(256, 32, 8, 128, kDecodeSplitTokens, kH200Sms), 0u);  // never split
}

}  // namespace
}  // namespace folio::cuda
