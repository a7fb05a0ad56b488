#include "kv/staging_overlay.h"

#include <bit>
#include <cassert>
#include <string>

namespace folio {
namespace {

size_t words_for(int32_t count) {
  return (static_cast<size_t>(count) + 63) / 64;
}

}  // namespace

StagingOverlay::StagingOverlay(int32_t num_staging, int64_t staging_bytes, int64_t block_bytes, int32_t num_ids)
    : num_staging_(num_staging),
      num_ids_(block_bytes > 0 ? num_ids : 0),
      staging_bytes_(staging_bytes),
      block_bytes_(block_bytes),
      staging_busy_(words_for(num_staging)),
      staging_available_(words_for(num_staging)),
      id_busy_(words_for(num_ids_)),
      id_available_(words_for(num_ids_)),
      staging_blockers_(static_cast<size_t>(num_staging), 0),
      id_blockers_(static_cast<size_t>(num_ids_), 0) {
  assert(num_staging >= 0 && num_ids_ >= 0);
  assert(num_ids_ == 0 || (staging_bytes > 0 && static_cast<int64_t>(num_ids_) * block_bytes <=
                                                    static_cast<int64_t>(num_staging) * staging_bytes));
  for (int32_t s = 0; s < num_staging_; ++s) update_staging(s);
  for (int32_t j = 0; j < num_ids_; ++j) update_id(j);
}

StagingOverlay::Range StagingOverlay::ids_over(int32_t staging) const {
  if (num_ids_ == 0) return {};
  const int64_t begin = staging * staging_bytes_, end = begin + staging_bytes_;
  const auto first = static_cast<int32_t>(begin / block_bytes_);
  const auto last = static_cast<int32_t>((end + block_bytes_ - 1) / block_bytes_);
  return {std::min(first, num_ids_), std::min(last, num_ids_)};
}

StagingOverlay::Range StagingOverlay::staging_under(int32_t id) const {
  const int64_t begin = id * block_bytes_, end = begin + block_bytes_;
  return {static_cast<int32_t>(begin / staging_bytes_),
          std::min(num_staging_, static_cast<int32_t>((end + staging_bytes_ - 1) / staging_bytes_))};
}

void StagingOverlay::assign(std::vector<uint64_t>& bits, int32_t index, bool value) {
  const uint64_t mask = uint64_t{1} << (index % 64);
  uint64_t& word = bits[static_cast<size_t>(index) / 64];
  word = value ? word | mask : word & ~mask;
}

int32_t StagingOverlay::lowest(const std::vector<uint64_t>& bits) {
  for (size_t w = 0; w < bits.size(); ++w) {
    if (bits[w] != 0) return static_cast<int32_t>(w * 64 + std::countr_zero(bits[w]));
  }
  return -1;
}

int32_t StagingOverlay::highest_below(const std::vector<uint64_t>& bits, int32_t end) {
  if (end <= 0) return -1;
  size_t w = static_cast<size_t>(end - 1) / 64;
  // Bits at or past `end` in its word are masked off.
  uint64_t word = bits[w] & (~uint64_t{0} >> (63 - (end - 1) % 64));
  while (true) {
    if (word != 0) return static_cast<int32_t>(w * 64 + 63 - std::countl_zero(word));
    if (w == 0) return -1;
    word = bits[--w];
  }
}

void StagingOverlay::update_staging(int32_t staging) {
  const bool was = test(staging_available_, staging);
  const bool now = !test(staging_busy_, staging) && staging_blockers_[static_cast<size_t>(staging)] == 0;
  if (was == now) return;
  assign(staging_available_, staging, now);
  num_available_staging_ += now ? 1 : -1;
}

void StagingOverlay::update_id(int32_t id) {
  const bool was = test(id_available_, id);
  const bool now = !test(id_busy_, id) && id_blockers_[static_cast<size_t>(id)] == 0;
  if (was == now) return;
  assign(id_available_, id, now);
  num_available_ids_ += now ? 1 : -1;
}

int32_t StagingOverlay::take_staging() {
  const int32_t staging = highest_below(staging_available_, num_staging_);
  if (staging < 0) return -1;
  assign(staging_busy_, staging, true);
  update_staging(staging);
  const Range ids = ids_over(staging);
  for (int32_t j = ids.first; j < ids.end; ++j) {
    ++id_blockers_[static_cast<size_t>(j)];
    update_id(j);
  }
  return staging;
}

void StagingOverlay::give_staging(int32_t staging) {
  assert(staging >= 0 && staging < num_staging_ && staging_busy(staging) && "staging block given back twice");
  assign(staging_busy_, staging, false);
  update_staging(staging);
  const Range ids = ids_over(staging);
  for (int32_t j = ids.first; j < ids.end; ++j) {
    --id_blockers_[static_cast<size_t>(j)];
    update_id(j);
  }
}

int32_t StagingOverlay::take_id() {
  const int32_t id = lowest(id_available_);
  if (id < 0) return -1;
  assign(id_busy_, id, true);
  ++num_busy_ids_;
  update_id(id);
  const Range under = staging_under(id);
  for (int32_t s = under.first; s < under.end; ++s) {
    ++staging_blockers_[static_cast<size_t>(s)];
    update_staging(s);
  }
  return id;
}

void StagingOverlay::give_id(int32_t id) {
  assert(id >= 0 && id < num_ids_ && id_busy(id) && "overlay id given back twice");
  assign(id_busy_, id, false);
  --num_busy_ids_;
  update_id(id);
  const Range under = staging_under(id);
  for (int32_t s = under.first; s < under.end; ++s) {
    --staging_blockers_[static_cast<size_t>(s)];
    update_staging(s);
  }
}

int32_t StagingOverlay::ids_blocked_by_next_staging(int32_t count) const {
  if (count > num_available_staging_) return 0;
  int32_t blocked = 0;
  int32_t below = num_ids_;  // ids counted so far are >= this (staging blocks come top down)
  int32_t staging = num_staging_;
  for (int32_t taken = 0; taken < count; ++taken) {
    staging = highest_below(staging_available_, staging);
    const Range ids = ids_over(staging);
    for (int32_t j = std::min(ids.end, below) - 1; j >= ids.first; --j) blocked += test(id_available_, j) ? 1 : 0;
    below = std::min(below, ids.first);
  }
  return blocked;
}

Status StagingOverlay::check_invariants() const {
  auto fail = [](const std::string& what) { return Status::error("staging overlay: " + what); };
  int32_t available_staging = 0, available_ids = 0, busy_ids = 0;
  for (int32_t s = 0; s < num_staging_; ++s) {
    int32_t blockers = 0;
    const Range ids = ids_over(s);
    for (int32_t j = ids.first; j < ids.end; ++j) blockers += id_busy(j) ? 1 : 0;
    if (blockers != staging_blockers_[static_cast<size_t>(s)]) {
      return fail("staging block " + std::to_string(s) + " blocker count stale");
    }
    if (staging_busy(s) && blockers > 0) {
      return fail("staging block " + std::to_string(s) + " busy under a busy overlay id");
    }
    const bool available = !staging_busy(s) && blockers == 0;
    if (available != test(staging_available_, s)) return fail("staging block " + std::to_string(s) + " bit stale");
    available_staging += available ? 1 : 0;
  }
  for (int32_t j = 0; j < num_ids_; ++j) {
    int32_t blockers = 0;
    const Range under = staging_under(j);
    for (int32_t s = under.first; s < under.end; ++s) blockers += staging_busy(s) ? 1 : 0;
    if (blockers != id_blockers_[static_cast<size_t>(j)])
      return fail("id " + std::to_string(j) + " blocker count stale");
    const bool available = !id_busy(j) && blockers == 0;
    if (available != test(id_available_, j)) return fail("id " + std::to_string(j) + " bit stale");
    available_ids += available ? 1 : 0;
    busy_ids += id_busy(j) ? 1 : 0;
  }
  if (available_staging != num_available_staging_ || available_ids != num_available_ids_ || busy_ids != num_busy_ids_) {
    return fail("counts stale");
  }
  return Status::ok();
}

}  // namespace folio
