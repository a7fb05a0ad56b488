// StagingOverlay: which staging blocks and which overlay block ids are free to hand out, where
// the two share bytes (docs/design/kv-staging-overlay.md).
//
// A residual format's pool lays each layer out as [sealed blocks][staging blocks]. The staging
// region's bytes also serve as num_ids more sealed blocks ("overlay ids"), so the memory that no
// running sequence stages in holds quantized tokens instead of idling:
//
//   bytes    0        sb       2sb      3sb      4sb          (sb = a staging block's bytes)
//   staging  [   s0   |   s1   |   s2   |   s3   ]
//   overlay  [ j0 | j1 | j2 | j3 | j4 | j5 | j6 ]               (bb = a sealed block's bytes < sb)
//
// An id and a staging block can both be busy only if their bytes do not overlap. Staging blocks
// are handed out from the top and ids from the bottom, so the two meet in the middle instead of
// fragmenting each other. Without overlay ids (block_bytes 0) this is just a set of free staging
// blocks. Every operation is O(1) or a scan of a bit set (one word per 64 blocks), allocation free.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace folio {

class StagingOverlay {
 public:
  StagingOverlay() = default;
  // num_staging blocks of staging_bytes each; with block_bytes > 0, num_ids ids of block_bytes
  // each laid over them from byte 0 (num_ids * block_bytes <= num_staging * staging_bytes).
  StagingOverlay(int32_t num_staging, int64_t staging_bytes = 0, int64_t block_bytes = 0, int32_t num_ids = 0);

  int32_t num_staging() const { return num_staging_; }
  int32_t num_ids() const { return num_ids_; }
  // Free and not overlapping anything busy: what take_staging / take_id can hand out.
  int32_t num_available_staging() const { return num_available_staging_; }
  int32_t num_available_ids() const { return num_available_ids_; }
  int32_t num_busy_ids() const { return num_busy_ids_; }
  // Ids a lent staging block keeps from being handed out, rounded up (0 without overlay ids).
  int32_t ids_per_staging() const {
    return num_ids_ == 0 ? 0 : static_cast<int32_t>((staging_bytes_ + block_bytes_ - 1) / block_bytes_);
  }
  bool id_busy(int32_t id) const { return test(id_busy_, id); }
  bool staging_busy(int32_t staging) const { return test(staging_busy_, staging); }

  // The highest available staging block / the lowest available id, now busy; -1 when none.
  int32_t take_staging();
  int32_t take_id();
  void give_staging(int32_t staging);
  void give_id(int32_t id);

  // Available ids that the next `count` take_staging() calls would make unavailable (0 when
  // fewer than count staging blocks are available): what a caller about to take count staging
  // blocks and then ids can still count on.
  int32_t ids_blocked_by_next_staging(int32_t count) const;

  // Busy flags against the blocker counts and availability bits, and no busy id overlapping a
  // busy staging block.
  Status check_invariants() const;

 private:
  struct Range {
    int32_t first = 0;
    int32_t end = 0;  // one past the last
  };
  Range ids_over(int32_t staging) const;  // ids whose bytes overlap the staging block's
  Range staging_under(int32_t id) const;  // staging blocks whose bytes overlap the id's

  static bool test(const std::vector<uint64_t>& bits, int32_t index) {
    return (bits[static_cast<size_t>(index) / 64] >> (index % 64)) & 1;
  }
  static void assign(std::vector<uint64_t>& bits, int32_t index, bool value);
  static int32_t lowest(const std::vector<uint64_t>& bits);
  static int32_t highest_below(const std::vector<uint64_t>& bits, int32_t end);  // -1 when none
  void update_staging(int32_t staging);  // availability from busy flag and blockers
  void update_id(int32_t id);

  int32_t num_staging_ = 0;
  int32_t num_ids_ = 0;
  int64_t staging_bytes_ = 0;
  int64_t block_bytes_ = 0;
  std::vector<uint64_t> staging_busy_, staging_available_;
  std::vector<uint64_t> id_busy_, id_available_;
  std::vector<int32_t> staging_blockers_;  // (num_staging,) busy ids overlapping it
  std::vector<int32_t> id_blockers_;       // (num_ids,) busy staging blocks overlapping it
  int32_t num_available_staging_ = 0;
  int32_t num_available_ids_ = 0;
  int32_t num_busy_ids_ = 0;
};

}  // namespace folio
