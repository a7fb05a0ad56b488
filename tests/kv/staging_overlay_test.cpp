// Tests for src/kv/staging_overlay: which staging blocks and overlay ids can be handed out where
// their bytes overlap. The property that matters is checked on bytes, not on the class's own
// counters: after every operation of a long random run, no busy id's byte range meets a busy
// staging block's. Geometries are the real formats' ratios (fp8 1.94 staging bytes per sealed
// block, kivi2 5.33) and an exact one (2.0).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kv/staging_overlay.h"

namespace folio {
namespace {

struct Geometry {
  int32_t num_staging;
  int64_t staging_bytes;
  int64_t block_bytes;
  int32_t num_ids() const { return static_cast<int32_t>(num_staging * staging_bytes / block_bytes); }
};

// Llama-3-8B shape per layer half, 128-token blocks: fp16 staging 262,144 bytes; fp8 135,168
// (values and float scales); kivi2 49,152.
constexpr Geometry kFp8{40, 262144, 135168};
constexpr Geometry kKivi2{12, 262144, 49152};
constexpr Geometry kExact{10, 200, 100};

bool overlaps(int64_t a, int64_t a_len, int64_t b, int64_t b_len) {
  return a < b + b_len && b < a + a_len;
}

void expect_no_busy_overlap(const StagingOverlay& overlay, const Geometry& g) {
  for (int32_t s = 0; s < overlay.num_staging(); ++s) {
    if (!overlay.staging_busy(s)) continue;
    for (int32_t j = 0; j < overlay.num_ids(); ++j) {
      if (overlay.id_busy(j)) {
        ASSERT_FALSE(overlaps(s * g.staging_bytes, g.staging_bytes, j * g.block_bytes, g.block_bytes))
            << "staging " << s << " and id " << j << " are both busy over the same bytes";
      }
    }
  }
}

StagingOverlay make(const Geometry& g) {
  return StagingOverlay(g.num_staging, g.staging_bytes, g.block_bytes, g.num_ids());
}

TEST(StagingOverlay, IdsFillTheStagingBytesAndNoMore) {
  EXPECT_EQ(make(kFp8).num_ids(), 77);  // 40 * 1.94 = 77.6
  EXPECT_EQ(make(kKivi2).num_ids(), 64);
  EXPECT_EQ(make(kExact).num_ids(), 20);
  const StagingOverlay plain(5);  // no overlay: only staging blocks
  EXPECT_EQ(plain.num_ids(), 0);
  EXPECT_EQ(plain.num_available_staging(), 5);
}

TEST(StagingOverlay, StagingComesFromTheTopAndIdsFromTheBottom) {
  StagingOverlay overlay = make(kExact);
  EXPECT_EQ(overlay.take_staging(), 9);  // bytes 1800..2000: ids 18 and 19
  EXPECT_EQ(overlay.num_available_ids(), 18);
  EXPECT_EQ(overlay.take_id(), 0);  // bytes 0..100: under staging 0
  EXPECT_EQ(overlay.num_available_staging(), 8);
  EXPECT_EQ(overlay.take_staging(), 8);
  EXPECT_EQ(overlay.take_id(), 1);
  EXPECT_EQ(overlay.take_id(), 2);  // staging 1 now blocked
  EXPECT_EQ(overlay.num_available_staging(), 6);
  overlay.give_id(2);
  EXPECT_EQ(overlay.num_available_staging(), 7);
  EXPECT_EQ(overlay.num_available_ids(), 14);
  overlay.give_id(1);
  EXPECT_EQ(overlay.num_available_staging(), 7) << "id 0 still blocks staging 0";
  ASSERT_TRUE(overlay.check_invariants().is_ok()) << overlay.check_invariants().message();
}

TEST(StagingOverlay, AnUnevenIdBlocksBothStagingBlocksItStraddles) {
  StagingOverlay overlay = make(kFp8);
  // Id 1 covers bytes 135,168..270,336: the end of staging 0 and the start of staging 1.
  EXPECT_EQ(overlay.take_id(), 0);
  EXPECT_EQ(overlay.take_id(), 1);
  EXPECT_EQ(overlay.num_available_staging(), 38);
  overlay.give_id(0);
  EXPECT_EQ(overlay.num_available_staging(), 38);
  overlay.give_id(1);
  EXPECT_EQ(overlay.num_available_staging(), 40);
}

TEST(StagingOverlay, AFreePoolHandsOutEveryStagingBlockOrEveryIdButNotBoth) {
  for (const Geometry& g : {kFp8, kKivi2, kExact}) {
    StagingOverlay overlay = make(g);
    for (int32_t s = 0; s < g.num_staging; ++s) EXPECT_GE(overlay.take_staging(), 0);
    EXPECT_EQ(overlay.take_staging(), -1);
    EXPECT_EQ(overlay.take_id(), -1);
    for (int32_t s = 0; s < g.num_staging; ++s) overlay.give_staging(s);
    for (int32_t j = 0; j < g.num_ids(); ++j) EXPECT_EQ(overlay.take_id(), j);
    EXPECT_EQ(overlay.take_id(), -1);
    // Only the bytes past the last whole id are free: not a whole staging block.
    EXPECT_EQ(overlay.take_staging(), -1);
    ASSERT_TRUE(overlay.check_invariants().is_ok());
  }
}

// ids_blocked_by_next_staging(n) must predict exactly what n take_staging() calls cost in ids.
TEST(StagingOverlay, RandomRunsNeverOverlapAndPredictTheirCost) {
  for (const Geometry& g : {kFp8, kKivi2, kExact}) {
    StagingOverlay overlay = make(g);
    std::mt19937 rng(7);
    std::vector<int32_t> busy_staging, busy_ids;
    int32_t predictions = 0;
    for (int32_t step = 0; step < 4000; ++step) {
      const int32_t action = static_cast<int32_t>(rng() % 5);
      if (action == 0) {
        const int32_t count = static_cast<int32_t>(rng() % 4);
        const int32_t ids_before = overlay.num_available_ids();
        const int32_t predicted = overlay.ids_blocked_by_next_staging(count);
        if (count <= overlay.num_available_staging()) {
          for (int32_t i = 0; i < count; ++i) busy_staging.push_back(overlay.take_staging());
          ASSERT_EQ(overlay.num_available_ids(), ids_before - predicted) << "step " << step;
          predictions += count > 0 ? 1 : 0;
        }
      } else if (action == 1) {
        const int32_t id = overlay.take_id();
        if (id >= 0) busy_ids.push_back(id);
      } else if (action == 2 && !busy_staging.empty()) {
        const size_t at = rng() % busy_staging.size();
        overlay.give_staging(busy_staging[at]);
        busy_staging.erase(busy_staging.begin() + static_cast<std::ptrdiff_t>(at));
      } else if (action >= 3 && !busy_ids.empty()) {
        const size_t at = rng() % busy_ids.size();
        overlay.give_id(busy_ids[at]);
        busy_ids.erase(busy_ids.begin() + static_cast<std::ptrdiff_t>(at));
      }
      ASSERT_NO_FATAL_FAILURE(expect_no_busy_overlap(overlay, g));
      const Status status = overlay.check_invariants();
      ASSERT_TRUE(status.is_ok()) << status.message();
    }
    EXPECT_GT(predictions, 300);
    EXPECT_EQ(static_cast<int32_t>(busy_ids.size()), overlay.num_busy_ids());
  }
}

}  // namespace
}  // namespace folio
