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

TEST(CudaAttentionPlan, WalkCoversEverySplitOnce) {
  for (int64_t rows : {1, 8, 100, 512, 6144}) {
    for (int32_t splits : {1, 2, 3, 4, 7, 32, 40, 625}) {
      for (int64_t slots : {1, 132, 396, 528}) {
        for (int32_t forced : {0, 1, 2, 3, 1 << 20}) {
          const DecodeWalk walk = decode_walk(rows, splits, slots, forced);
          EXPECT_GE(walk.ctas_per_row, 1);
          EXPECT_LE(walk.ctas_per_row, splits);
          EXPECT_GE(static_cast<int64_t>(walk.ctas_per_row) * walk.splits_per_cta, splits);      // every split walked
          EXPECT_LT(static_cast<int64_t>(walk.ctas_per_row - 1) * walk.splits_per_cta, splits);  // no idle CTA
          if (forced > 0 && forced <= splits && splits % forced == 0) {
            EXPECT_EQ(walk.ctas_per_row, forced);
          }
        }
      }
    }
  }
}

TEST(CudaAttentionPlan, WalkFillsTheGpuWithTheFewestCtas) {
  // b64 x 4k, 8 kv heads: 512 rows of 4 splits. At 4 CTAs an SM (528 slots) one wave of CTAs
  // walking all 4; at 3 (396 slots) two CTAs a row (3 waves of 2 splits against 2 of 4).
  EXPECT_EQ(decode_walk(512, 4, 528).ctas_per_row, 1);
  EXPECT_EQ(decode_walk(512, 4, 396).ctas_per_row, 2);
  // b1 x 32k: 8 rows of 32 splits, one CTA a split (a wave holds them all).
  const DecodeWalk lone = decode_walk(8, 32, 528);
  EXPECT_EQ(lone.ctas_per_row, 32);
  EXPECT_EQ(lone.splits_per_cta, 1);
  // Serving 768 sequences of 1-2k: the rows alone are 12 waves, one CTA walks both splits.
  EXPECT_EQ(decode_walk(6144, 2, 528).ctas_per_row, 1);
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
