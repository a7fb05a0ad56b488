// Randomized invariant test for the KV cache manager: a small scheduler-like driver runs 10,000+
// random operations (admit prompts sharing prefixes, prefill chunks, decode, speculative
// rollback, fork, free, swap out and in, with a pool small enough to run out) and after every
// operation checks the manager's invariants. At the end of every engine step (copies run, new
// K/V written) it reads every token of every sequence back through its block table and checks
// it holds that prefix's fake K/V, so a wrong prefix hit, a missed or misordered copy, or a
// block freed too early shows up as wrong bytes. At the end everything is freed and both pools
// must be entirely free again. With sliding-window groups (kv_groups.h) every group's table is
// checked the same way, each group writing its own fake K/V, and a window group's table must
// still hold every token the next query's window reaches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kv/block_copy.h"
#include "kv/host_kv_pool.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_cache_storage.h"
#include "kv_test_fill.h"

namespace folio {
namespace {

struct RandomizedConfig {
  int32_t block_size;
  bool enable_prefix_caching;
  uint32_t seed;
  std::vector<int32_t> group_windows = {};  // empty: one full group
};

// A group's K/V differ from another group's of the same tokens (other layers).
uint64_t group_key(uint64_t extra_key, int32_t group) {
  return extra_key + static_cast<uint64_t>(group) * 0x51ed27ull;
}

// What the scheduler knows of a sequence: its tokens and how many have K/V in the cache.
struct SimulatedSequence {
  std::vector<int32_t> tokens;
  int32_t num_computed = 0;
  uint64_t extra_key = kNoExtraKey;
  bool swapped = false;
  int32_t scheduled = 0;     // tokens reserved this step, written at the step's end
  int32_t last_release = 0;  // the position of the last release_out_of_window
};

class KvCacheRandomized : public ::testing::TestWithParam<RandomizedConfig> {
 protected:
  static constexpr int32_t kMaxSequences = 12;
  static constexpr int32_t kMaxTokens = 90;

  KvCacheRandomized()
      : config_(GetParam()),
        // About 160 token slots whatever the block size: tight enough for 12 sequences of up
        // to 90 tokens to run out often.
        // (and as much again for every further group: a token takes a slot in each)
        num_blocks_(std::max(8, 160 / config_.block_size) *
                    std::max<int32_t>(1, static_cast<int32_t>(config_.group_windows.size()))),
        num_host_blocks_(num_blocks_ / 2),
        manager_({.num_blocks = num_blocks_,
                  .block_size = config_.block_size,
                  .num_host_blocks = num_host_blocks_,
                  .enable_prefix_caching = config_.enable_prefix_caching,
                  .group_windows = config_.group_windows}),
        storage_(KvCacheShape{.num_layers = 2,
                              .num_blocks = num_blocks_,
                              .block_size = config_.block_size,
                              .num_kv_heads = 1,
                              .head_dim = 4}),
        host_(storage_.shape(), num_host_blocks_),
        rng_(config_.seed) {
    // A few "system prompts" that new prompts start with, so prefixes are shared.
    for (int32_t length : {0, 3, 9, 17, 26}) {
      std::vector<int32_t> prefix(length);
      for (int32_t& token : prefix) token = random(0, 50);
      prefixes_.push_back(prefix);
    }
  }

  int32_t random(int32_t low, int32_t high) {  // inclusive
    return std::uniform_int_distribution<int32_t>(low, high)(rng_);
  }

  void check() {
    const Status status = manager_.check_invariants();
    ASSERT_TRUE(status.is_ok()) << status.message() << " after operation " << num_operations_;
  }

  // A random sequence id in a state, not touched yet this step.
  std::optional<SequenceId> pick(bool swapped) {
    std::vector<SequenceId> candidates;
    for (const auto& [id, sequence] : sequences_) {
      if (sequence.swapped == swapped && sequence.scheduled == 0) candidates.push_back(id);
    }
    if (candidates.empty()) return std::nullopt;
    return candidates[random(0, static_cast<int32_t>(candidates.size()) - 1)];
  }

  // What a failed call must leave alone.
  struct Snapshot {
    std::vector<int32_t> free_queue;
    std::vector<int32_t> host_free_queue;
    size_t num_pending_copies;
    std::map<SequenceId, std::vector<int32_t>> tables;
    bool operator==(const Snapshot&) const = default;
  };
  Snapshot snapshot() const {
    Snapshot result{
        manager_.device_pool().free_queue(), manager_.host_pool().free_queue(), manager_.pending_copies().size(), {}};
    for (const auto& [id, sequence] : sequences_) {
      for (int32_t g = 0; g < manager_.num_groups(); ++g) {
        const auto table = sequence.swapped ? manager_.host_block_table(id, g) : manager_.block_table(id, g);
        result.tables[id].insert(result.tables[id].end(), table.begin(), table.end());
      }
    }
    return result;
  }

  void admit() {
    if (static_cast<int32_t>(sequences_.size()) >= kMaxSequences) return;
    SimulatedSequence sequence;
    sequence.tokens = prefixes_[random(0, static_cast<int32_t>(prefixes_.size()) - 1)];
    for (int32_t count = random(1, 12); count > 0; --count) sequence.tokens.push_back(random(0, 50));
    sequence.extra_key = random(0, 4) == 0 ? 7 : kNoExtraKey;  // some run under an "adapter"
    const PrefixMatch match = manager_.find_cached_prefix(sequence.tokens, sequence.extra_key);
    ASSERT_EQ(match.num_computed_tokens % config_.block_size, 0);
    ASSERT_LT(match.num_computed_tokens, static_cast<int32_t>(sequence.tokens.size()));
    const int32_t remaining = static_cast<int32_t>(sequence.tokens.size()) - match.num_computed_tokens;
    const int32_t chunk = random(1, remaining);
    const SequenceId id = next_id_++;
    const Snapshot before = snapshot();
    const bool can = manager_.can_allocate_slots(id, chunk, match);
    const bool allocated = manager_.allocate_slots(id, chunk, match);
    ASSERT_EQ(can, allocated);
    if (!allocated) {
      ++num_refusals_;
      ASSERT_FALSE(manager_.contains(id));
      ASSERT_EQ(snapshot(), before);
      return;
    }
    sequence.num_computed = match.num_computed_tokens;
    sequence.scheduled = chunk;
    // A window group's part of a prefix hit comes released up to the hit's window.
    sequence.last_release = match.num_computed_tokens;
    sequences_[id] = sequence;
  }

  void schedule_running() {
    const std::optional<SequenceId> id = pick(false);
    if (!id) return;
    SimulatedSequence& sequence = sequences_[*id];
    if (sequence.num_computed >= kMaxTokens) return finish(*id);
    int32_t count = static_cast<int32_t>(sequence.tokens.size()) - sequence.num_computed;
    if (count == 0) {  // decoding: a sampled token, sometimes with speculative drafts
      const int32_t drafts = random(0, 3) == 0 ? random(1, 4) : 0;
      for (int32_t i = 0; i <= drafts; ++i) sequence.tokens.push_back(random(0, 50));
      count = drafts + 1;
    } else {
      count = random(1, count);  // a prefill chunk
    }
    // What the scheduler does before scheduling a running sequence's next tokens.
    manager_.release_out_of_window(*id, sequence.num_computed);
    sequence.last_release = sequence.num_computed;
    const Snapshot before = snapshot();
    const int32_t tokens_before = manager_.num_tokens(*id);
    const bool can = manager_.can_allocate_slots(*id, count);
    const bool allocated = manager_.allocate_slots(*id, count);
    ASSERT_EQ(can, allocated);
    if (!allocated) {
      ++num_refusals_;
      ASSERT_EQ(snapshot(), before);
      ASSERT_EQ(manager_.num_tokens(*id), tokens_before);
      return;
    }
    sequence.scheduled = count;
  }

  void roll_back() {  // rejected speculative tokens
    const std::optional<SequenceId> id = pick(false);
    if (!id) return;
    SimulatedSequence& sequence = sequences_[*id];
    if (sequence.num_computed < 2) return;
    int32_t keep = sequence.num_computed - random(1, std::min(4, sequence.num_computed - 1));
    // With window groups only what speculation does: back to just past the last release's
    // position (the verified token's position + 1), never into what it released.
    if (!config_.group_windows.empty()) keep = std::max(keep, sequence.last_release + 1);
    if (keep >= sequence.num_computed) return;
    manager_.truncate(*id, keep);
    sequence.tokens.resize(keep);
    sequence.num_computed = keep;
  }

  void fork() {
    if (static_cast<int32_t>(sequences_.size()) >= kMaxSequences) return;
    const std::optional<SequenceId> parent = pick(false);
    if (!parent) return;
    const SequenceId child = next_id_++;
    manager_.fork(*parent, child);
    sequences_[child] = sequences_[*parent];
    ++num_forks_;
  }

  void finish(SequenceId id) {
    manager_.free(id);
    sequences_.erase(id);
  }

  void swap_out() {
    std::vector<SequenceId> group;
    for (int32_t count = random(1, 2); count > 0; --count) {
      const std::optional<SequenceId> id = pick(false);
      if (id && std::ranges::find(group, *id) == group.end()) group.push_back(*id);
    }
    if (group.empty()) return;
    const Snapshot before = snapshot();
    const bool can = manager_.can_swap_out(group);
    ASSERT_EQ(manager_.swap_out(group), can);
    if (!can) {
      ASSERT_EQ(snapshot(), before);
      return;
    }
    for (SequenceId id : group) sequences_[id].swapped = true;
    ++num_swaps_;
  }

  void swap_in() {
    const std::optional<SequenceId> id = pick(true);
    if (!id) return;
    const std::vector<SequenceId> group = {*id};
    const Snapshot before = snapshot();
    const bool can = manager_.can_swap_in(group);
    ASSERT_EQ(manager_.swap_in(group), can);
    if (!can) {
      ASSERT_EQ(snapshot(), before);
      return;
    }
    sequences_[*id].swapped = false;
  }

  // The forward pass: decided copies first, then every scheduled token's K/V, then the newly
  // full blocks become findable.
  void run_step() {
    execute_block_copies(manager_.take_pending_copies(), storage_, &host_);
    for (auto& [id, sequence] : sequences_) {
      if (sequence.scheduled == 0) continue;
      const int32_t first = sequence.num_computed;
      for (int32_t g = 0; g < manager_.num_groups(); ++g) {
        std::vector<int32_t> slots;
        manager_.append_slot_mapping(id, first, sequence.scheduled, slots, g);
        const std::vector<uint64_t> fingerprints =
            testing::prefix_fingerprints(sequence.tokens, group_key(sequence.extra_key, g));
        for (int32_t i = 0; i < sequence.scheduled; ++i) {
          testing::write_fake_kv(storage_, slots[i], fingerprints[first + i]);
        }
      }
      sequence.num_computed += sequence.scheduled;
      sequence.scheduled = 0;
      manager_.cache_full_blocks(id, std::span<const int32_t>(sequence.tokens).first(sequence.num_computed));
    }
  }

  void verify_contents() {
    for (const auto& [id, sequence] : sequences_) {
      ASSERT_EQ(manager_.num_tokens(id), sequence.num_computed) << "sequence " << id;
      for (int32_t g = 0; g < manager_.num_groups(); ++g) {
        const std::vector<uint64_t> fingerprints =
            testing::prefix_fingerprints(sequence.tokens, group_key(sequence.extra_key, g));
        const auto table = sequence.swapped ? manager_.host_block_table(id, g) : manager_.block_table(id, g);
        // The next query (at num_computed) reads from here on: nothing there may be released.
        const int32_t window = manager_.group_window(g);
        const int32_t needed = window == 0 ? 0 : std::max(0, sequence.num_computed - window + 1);
        for (int32_t position = 0; position < sequence.num_computed; ++position) {
          if (table[position / config_.block_size] == BlockPool::kNullBlock) {
            ASSERT_LT(position, needed) << "sequence " << id << " group " << g << " released position " << position;
            ++num_released_reads_skipped_;
            continue;
          }
          const bool matches =
              sequence.swapped
                  ? testing::host_fake_kv_matches(host_, storage_.shape(), table, position, fingerprints[position])
                  : testing::fake_kv_matches(storage_, table, position, fingerprints[position]);
          ASSERT_TRUE(matches) << "sequence " << id << " group " << g << " position " << position << " after operation "
                               << num_operations_;
        }
      }
    }
  }

  void run(int32_t num_operations) {
    while (num_operations_ < num_operations) {
      // One engine step: a few scheduling decisions, then the forward pass.
      for (int32_t decisions = random(1, 6); decisions > 0; --decisions) {
        const int32_t choice = random(0, 99);
        if (choice < 20) {
          admit();
        } else if (choice < 62) {
          schedule_running();
        } else if (choice < 68) {
          roll_back();
        } else if (choice < 74) {
          fork();
        } else if (choice < 84) {
          if (const std::optional<SequenceId> id = pick(random(0, 3) == 0)) finish(*id);
        } else if (choice < 92) {
          swap_out();
        } else {
          swap_in();
        }
        if (::testing::Test::HasFatalFailure()) return;
        ++num_operations_;
        check();
        if (::testing::Test::HasFatalFailure()) return;
      }
      run_step();
      check();
      verify_contents();
      if (::testing::Test::HasFatalFailure()) return;
    }
  }

  RandomizedConfig config_;
  int32_t num_blocks_;
  int32_t num_host_blocks_;
  KvCacheManager manager_;
  KvCacheStorage storage_;
  HostKvPool host_;
  std::mt19937 rng_;
  std::vector<std::vector<int32_t>> prefixes_;
  std::map<SequenceId, SimulatedSequence> sequences_;
  SequenceId next_id_ = 0;
  int32_t num_operations_ = 0;
  int32_t num_refusals_ = 0;
  int32_t num_forks_ = 0;
  int32_t num_swaps_ = 0;
  int64_t num_released_reads_skipped_ = 0;
};

TEST_P(KvCacheRandomized, InvariantsHoldAndEveryTokenReadsBack) {
  run(12000);
  ASSERT_FALSE(HasFatalFailure());
  const KvCacheMetrics metrics = manager_.metrics();
  std::printf(
      "operations %d refusals %d forks %d swaps %d copy-on-write %lld swapped in %lld "
      "prefix hits %lld/%lld blocks\n",
      num_operations_, num_refusals_, num_forks_, num_swaps_, static_cast<long long>(metrics.num_copy_on_write_blocks),
      static_cast<long long>(metrics.num_swapped_in_blocks),
      static_cast<long long>(metrics.prefix_cache.num_hit_blocks),
      static_cast<long long>(metrics.prefix_cache.num_query_blocks));
  // The workload really exercised what it claims to.
  EXPECT_GT(num_refusals_, 50);
  EXPECT_GT(num_forks_, 50);
  EXPECT_GT(num_swaps_, 50);
  // With one token per block no block is ever partial, so nothing is ever copied on write.
  if (config_.block_size > 1) {
    EXPECT_GT(metrics.num_copy_on_write_blocks, 50);
  }
  EXPECT_GT(metrics.num_swapped_in_blocks, 50);
  // Window groups really released blocks.
  const bool windowed = std::ranges::any_of(config_.group_windows, [](int32_t w) { return w > 0; });
  EXPECT_EQ(num_released_reads_skipped_ > 0, windowed);
  if (config_.enable_prefix_caching) {
    EXPECT_GT(metrics.prefix_cache.num_hit_blocks, 50);
  } else {
    EXPECT_EQ(metrics.prefix_cache.num_hit_blocks, 0);
  }

  // Everything ends: both pools are entirely free again (cached blocks count as free).
  while (!sequences_.empty()) {
    finish(sequences_.begin()->first);
    check();
    ASSERT_FALSE(HasFatalFailure());
  }
  EXPECT_EQ(manager_.num_free_blocks(), num_blocks_ - 1);
  EXPECT_EQ(manager_.host_pool().num_free_blocks(), num_host_blocks_ - 1);
  EXPECT_EQ(manager_.metrics().num_used_blocks, 0);
  EXPECT_EQ(manager_.metrics().num_sequences, 0);
}

INSTANTIATE_TEST_SUITE_P(
    BlockSizes, KvCacheRandomized,
    ::testing::Values(RandomizedConfig{4, true, 1}, RandomizedConfig{4, false, 2}, RandomizedConfig{1, true, 3},
                      RandomizedConfig{16, true, 4}, RandomizedConfig{3, true, 5},
                      // Sliding-window groups: windows under, at and over
                      // the block size, one or two window groups.
                      RandomizedConfig{4, true, 6, {0, 8, 8}}, RandomizedConfig{4, false, 7, {0, 8}},
                      RandomizedConfig{3, true, 8, {0, 5}}, RandomizedConfig{1, true, 9, {0, 0, 4}},
                      RandomizedConfig{16, true, 10, {0, 20}}, RandomizedConfig{4, true, 11, {0, 3}},
                      RandomizedConfig{4, true, 12, {0, 4}}),
    [](const ::testing::TestParamInfo<RandomizedConfig>& info) {
      std::string name = "BlockSize" + std::to_string(info.param.block_size) +
                         (info.param.enable_prefix_caching ? "PrefixCache" : "NoPrefixCache");
      for (int32_t window : info.param.group_windows) name += "W" + std::to_string(window);
      return name;
    });

}  // namespace
}  // namespace folio
