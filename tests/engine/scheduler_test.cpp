// The scheduler on its own, with no model: requests are token lists, a step is schedule() then
// on_computed() and one made-up token for every chunk that samples. What it decides (chunks,
// budgets, preemption, swaps, prefix hits, forks, block copies, statuses) is checked against
// the rules in scheduler.h, and the KV manager's invariants after every step.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <vector>

#include "support/tiny_model.h"

namespace folio {
namespace {

class SchedulerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto tiny = testing::TinyModel::create();
    ASSERT_TRUE(tiny) << tiny.error();
    tiny_ = std::move(tiny).value().release();
  }
  static void TearDownTestSuite() {
    delete tiny_;
    tiny_ = nullptr;
  }

  // A request whose prompt is `length` tokens starting at `first` (ids stay in the tiny vocab).
  Request* make(int32_t length, int32_t max_tokens = 4, int32_t first = 1, int32_t priority = 0, int32_t n = 1) {
    auto params = std::make_shared<RequestParams>();
    params->max_tokens = max_tokens;
    params->priority = priority;
    params->n = n;
    std::vector<int32_t> prompt(static_cast<size_t>(length));
    std::iota(prompt.begin(), prompt.end(), first);
    for (int32_t& t : prompt) t = 1 + t % 250;
    const RequestId id = next_id_++;
    requests_.push_back(std::make_unique<Request>(id, id, 0, params, std::move(prompt), length, tiny_->tokenizer()));
    requests_.back()->arrival_order = static_cast<uint64_t>(id);
    return requests_.back().get();
  }

  // schedule -> computed -> one token per sampling chunk; the KV manager's invariants after.
  SchedulerOutput step(Scheduler& scheduler) {
    SchedulerOutput out = scheduler.schedule();
    scheduler.on_computed(out);
    for (const ScheduledChunk& chunk : out.chunks) {
      if (chunk.samples) chunk.request->tokens.push_back(7);
    }
    const Status s = scheduler.kv().check_invariants();
    EXPECT_TRUE(s) << s.message();
    return out;
  }

  // count requests of prompt_length tokens (prompts 30 tokens apart) and max_tokens outputs.
  std::vector<Request*> add_requests(Scheduler& scheduler, int32_t count, int32_t prompt_length, int32_t max_tokens) {
    std::vector<Request*> requests;
    for (int32_t i = 0; i < count; ++i) {
      requests.push_back(make(prompt_length, max_tokens, 1 + 30 * i));
      scheduler.add(requests.back());
    }
    return requests;
  }

  // Steps until the requests reach their max_tokens (at most 2,000 steps).
  struct RunToTheEnd {
    int32_t finished = 0;
    int32_t most_running = 0;
  };
  RunToTheEnd run_to_the_end(Scheduler& scheduler, const std::vector<Request*>& requests) {
    RunToTheEnd run;
    for (int steps = 0; scheduler.has_work() && steps < 2000; ++steps) {
      step(scheduler);
      run.most_running = std::max(run.most_running, scheduler.num_running());
      for (Request* r : requests) {
        if (r->status == RequestStatus::kRunning && r->num_output_tokens() >= r->params().max_tokens) {
          scheduler.finish(r, FinishReason::kLength);
          ++run.finished;
        }
      }
    }
    return run;
  }

  static const ScheduledChunk* chunk_of(const SchedulerOutput& out, const Request* request) {
    for (const ScheduledChunk& c : out.chunks) {
      if (c.request == request) return &c;
    }
    return nullptr;
  }

  static KvCacheConfig kv(int32_t blocks, int32_t block_size = 4, int32_t host_blocks = 0, bool prefix = true) {
    return KvCacheConfig{blocks + 1, block_size, host_blocks > 0 ? host_blocks + 1 : 0, prefix};
  }

  static inline testing::TinyModel* tiny_ = nullptr;
  std::vector<std::unique_ptr<Request>> requests_;
  RequestId next_id_ = 1;
};

TEST_F(SchedulerTest, LongPromptIsChunkedUnderTheTokenBudgetAndSamplesOnlyAtItsEnd) {
  Scheduler scheduler(SchedulerConfig{32, 8, PreemptionMode::kRecompute}, kv(64));
  Request* r = make(100);
  scheduler.add(r);
  std::vector<int32_t> chunks;
  for (int i = 0; i < 4; ++i) {
    const SchedulerOutput out = step(scheduler);
    ASSERT_EQ(out.chunks.size(), 1u);
    EXPECT_LE(out.num_batched_tokens, 32);
    EXPECT_EQ(out.chunks[0].first_position, 32 * i);
    EXPECT_EQ(out.chunks[0].samples, i == 3);
    chunks.push_back(out.chunks[0].num_new_tokens);
  }
  EXPECT_EQ(chunks, (std::vector<int32_t>{32, 32, 32, 4}));
  EXPECT_EQ(r->num_computed_tokens, 100);
  EXPECT_EQ(r->status, RequestStatus::kRunning);
}

TEST_F(SchedulerTest, ChunksCarryTablesThatCoverTheirTokens) {
  Scheduler scheduler(SchedulerConfig{64, 8, PreemptionMode::kRecompute}, kv(64, 4));
  for (int i = 0; i < 5; ++i) scheduler.add(make(3 + 5 * i, 8, 10 * i));
  for (int s = 0; s < 6; ++s) {
    const SchedulerOutput out = step(scheduler);
    EXPECT_EQ(out.block_size, 4);
    for (const ScheduledChunk& c : out.chunks) {
      const int32_t end = c.first_position + c.num_new_tokens;
      EXPECT_EQ(static_cast<int32_t>(c.block_table.size()), (end + 3) / 4);
      for (int32_t block : c.block_table) EXPECT_GT(block, 0);  // never the null block
    }
  }
}

TEST_F(SchedulerTest, RunningDecodesComeBeforeNewPrefillsAndMaxNumSeqsCaps) {
  Scheduler scheduler(SchedulerConfig{16, 2, PreemptionMode::kRecompute}, kv(64));
  Request* a = make(4, 8);
  Request* b = make(4, 8, 50);
  Request* c = make(30, 8, 100);
  scheduler.add(a);
  scheduler.add(b);
  step(scheduler);  // a and b prefill
  scheduler.add(c);
  const SchedulerOutput out = step(scheduler);
  // Two running at the cap: c waits although the budget had room.
  ASSERT_EQ(out.chunks.size(), 2u);
  EXPECT_EQ(out.chunks[0].request, a);
  EXPECT_EQ(out.chunks[1].request, b);
  EXPECT_EQ(out.chunks[0].num_new_tokens, 1);
  EXPECT_EQ(c->status, RequestStatus::kWaiting);
  EXPECT_EQ(scheduler.num_running(), 2);
  EXPECT_EQ(scheduler.num_waiting(), 1);
}

TEST_F(SchedulerTest, OutOfBlocksTheNewestRunningRequestIsRecomputedAndNothingIsAdmitted) {
  // 6 blocks of 4 tokens: two requests of 11 tokens fill 3 blocks each; the next token of the
  // first needs a fourth block, so the newest (b) gives its blocks up.
  Scheduler scheduler(SchedulerConfig{64, 8, PreemptionMode::kRecompute}, kv(6, 4));
  Request* a = make(11, 8, 1);
  Request* b = make(11, 8, 100);
  scheduler.add(a);
  scheduler.add(b);
  step(scheduler);
  step(scheduler);  // both at 12 tokens now: 3 blocks each, the pool is full
  Request* late = make(2, 2, 200);
  scheduler.add(late);
  const SchedulerOutput out = step(scheduler);
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], b->id);
  EXPECT_EQ(b->status, RequestStatus::kWaiting);
  EXPECT_EQ(b->num_computed_tokens, 0);
  EXPECT_EQ(b->num_preemptions, 1);
  EXPECT_FALSE(scheduler.kv().contains(b->sequence_id()));
  EXPECT_NE(chunk_of(out, a), nullptr);
  EXPECT_EQ(chunk_of(out, late), nullptr);  // no admission in a step that preempted
  EXPECT_EQ(scheduler.num_preemptions(), 1);
}

TEST_F(SchedulerTest, SwapPreemptionMovesBlocksToTheHostAndBackInOrder) {
  Scheduler scheduler(SchedulerConfig{64, 8, PreemptionMode::kSwap}, kv(6, 4, 16));
  Request* a = make(11, 12, 1);
  Request* b = make(11, 12, 100);
  scheduler.add(a);
  scheduler.add(b);
  step(scheduler);
  step(scheduler);
  const SchedulerOutput out = step(scheduler);
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(b->status, RequestStatus::kSwapped);
  EXPECT_TRUE(scheduler.kv().is_swapped(b->sequence_id()));
  ASSERT_FALSE(out.block_copies.empty());
  for (const BlockCopy& copy : out.block_copies) EXPECT_EQ(copy.direction, BlockCopyDirection::kDeviceToHost);
  // Once a finishes and frees its blocks, b comes back with host -> device copies first.
  scheduler.finish(a, FinishReason::kStop);
  EXPECT_EQ(a->status, RequestStatus::kFinished);
  EXPECT_EQ(a->finish_reason, FinishReason::kStop);
  const SchedulerOutput back = step(scheduler);
  EXPECT_EQ(b->status, RequestStatus::kRunning);
  ASSERT_FALSE(back.block_copies.empty());
  EXPECT_EQ(back.block_copies.front().direction, BlockCopyDirection::kHostToDevice);
  ASSERT_NE(chunk_of(back, b), nullptr);
  EXPECT_EQ(chunk_of(back, b)->num_new_tokens, 1);  // its K/V came back: it decodes on
}

TEST_F(SchedulerTest, ASharedPrefixStartsFromTheCachedBlocks) {
  Scheduler scheduler(SchedulerConfig{64, 8, PreemptionMode::kRecompute}, kv(64, 4));
  Request* first = make(18, 2, 1);
  scheduler.add(first);
  step(scheduler);
  Request* second = make(18, 2, 1);  // the same 18 tokens
  scheduler.add(second);
  const SchedulerOutput out = step(scheduler);
  const ScheduledChunk* c = chunk_of(out, second);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->first_position, 16);  // 4 full blocks found; the last tokens are computed
  EXPECT_EQ(c->num_new_tokens, 2);
  EXPECT_GT(scheduler.kv().metrics().prefix_cache.num_hit_tokens, 0);
}

// Two requests with one prompt arriving together: the second waits for the pass that computes
// the first one's blocks and then starts from them (SchedulerConfig::min_deferred_prefix_tokens).
TEST_F(SchedulerTest, ARequestWaitsOneStepForThePrefixAnotherComputesBesideIt) {
  SchedulerConfig config{64, 8, PreemptionMode::kRecompute};
  config.min_deferred_prefix_tokens = 8;
  Scheduler scheduler(config, kv(64, 4));
  Request* first = make(40, 2, 1);
  Request* second = make(40, 2, 1);   // the same 40 tokens
  Request* third = make(12, 2, 100);  // unrelated, behind it: first come, first served
  scheduler.add(first);
  scheduler.add(second);
  scheduler.add(third);
  const SchedulerOutput one = step(scheduler);
  EXPECT_NE(chunk_of(one, first), nullptr);
  EXPECT_EQ(chunk_of(one, second), nullptr);
  EXPECT_EQ(chunk_of(one, third), nullptr);
  EXPECT_EQ(second->status, RequestStatus::kWaiting);
  const SchedulerOutput two = step(scheduler);
  const ScheduledChunk* c = chunk_of(two, second);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->first_position, 36);  // 9 full blocks found; the last 4 tokens computed
  EXPECT_EQ(c->num_new_tokens, 4);
  EXPECT_NE(chunk_of(two, third), nullptr);
  EXPECT_EQ(scheduler.kv().metrics().prefix_cache.num_hit_tokens, 36);
}

// A prompt that shares only its beginning waits for that part; one that shares less than the
// threshold, or a scheduler with the threshold at 0, is admitted beside the first at once.
TEST_F(SchedulerTest, OnlyASharedPartAtLeastTheThresholdIsWaitedFor) {
  for (const int32_t threshold : {8, 24, 0}) {
    SCOPED_TRACE(threshold);
    SchedulerConfig config{64, 8, PreemptionMode::kRecompute};
    config.min_deferred_prefix_tokens = threshold;
    Scheduler scheduler(config, kv(64, 4));
    Request* first = make(40, 2, 1);
    Request* second = make(40, 2, 1);
    for (int32_t i = 21; i < 40; ++i) second->tokens[static_cast<size_t>(i)] = 251 - i;  // shares 21 tokens
    scheduler.add(first);
    scheduler.add(second);
    const SchedulerOutput one = step(scheduler);
    if (threshold == 8) {
      ASSERT_EQ(chunk_of(one, second), nullptr);
      const SchedulerOutput two = step(scheduler);
      const ScheduledChunk* c = chunk_of(two, second);
      ASSERT_NE(c, nullptr);
      EXPECT_EQ(c->first_position, 20);  // 5 whole blocks of the 21 shared tokens
    } else {
      const ScheduledChunk* c = chunk_of(one, second);
      ASSERT_NE(c, nullptr);
      EXPECT_EQ(c->first_position, 0);
    }
  }
}

// A prompt chunked over several steps: the request that shares it waits while each step's chunk
// computes enough of it, and starts from what is cached once the rest is below the threshold.
TEST_F(SchedulerTest, AWaitingRequestFollowsAChunkedPrefillOfItsPrefix) {
  SchedulerConfig config{16, 8, PreemptionMode::kRecompute};
  config.min_deferred_prefix_tokens = 8;
  Scheduler scheduler(config, kv(64, 4));
  Request* first = make(40, 2, 1);
  Request* second = make(40, 2, 1);
  scheduler.add(first);
  scheduler.add(second);
  EXPECT_EQ(chunk_of(step(scheduler), second), nullptr);  // first: [0, 16)
  EXPECT_EQ(chunk_of(step(scheduler), second), nullptr);  // first: [16, 32)
  const SchedulerOutput three = step(scheduler);          // first: [32, 40), 4 tokens pending
  const ScheduledChunk* c = chunk_of(three, second);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->first_position, 32);
  EXPECT_EQ(c->num_new_tokens, 8);
}

// Requests that computed a prompt in earlier steps and now decode complete no block the next
// request with that prompt could use: it starts at once from the cached blocks.
TEST_F(SchedulerTest, DecodesOfASharedPromptAreNotWaitedFor) {
  SchedulerConfig config{64, 8, PreemptionMode::kRecompute};
  config.min_deferred_prefix_tokens = 8;
  Scheduler scheduler(config, kv(64, 4));
  std::vector<Request*> running;
  for (int32_t i = 0; i < 3; ++i) {
    running.push_back(make(24, 8, 1));
    for (int32_t j = 16; j < 24; ++j) running.back()->tokens[static_cast<size_t>(j)] = 200 + i;
    scheduler.add(running.back());
  }
  step(scheduler);  // the first computes the shared 16 tokens; the rest wait for them
  step(scheduler);
  step(scheduler);
  for (const Request* r : running) ASSERT_EQ(r->status, RequestStatus::kRunning);
  Request* late = make(24, 2, 1);  // the shared 16 tokens, then its own
  for (int32_t j = 16; j < 24; ++j) late->tokens[static_cast<size_t>(j)] = 240;
  scheduler.add(late);
  const SchedulerOutput out = step(scheduler);
  const ScheduledChunk* c = chunk_of(out, late);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->first_position, 16);
  for (const Request* r : running) EXPECT_EQ(chunk_of(out, r)->num_new_tokens, 1);
}

TEST_F(SchedulerTest, AForkSharesBlocksAndCopiesTheSharedPartialBlockOnItsFirstWrite) {
  Scheduler scheduler(SchedulerConfig{64, 8, PreemptionMode::kRecompute}, kv(64, 4));
  Request* parent = make(6, 8, 1, 0, /*n=*/2);
  scheduler.add(parent);
  step(scheduler);  // 6 prompt tokens + the first sample: 2 blocks, the second partial
  const int32_t used = scheduler.kv().metrics().num_used_blocks;
  Request* child = make(6, 8, 1);
  child->tokens = parent->tokens;
  scheduler.fork(*parent, child);
  EXPECT_EQ(child->status, RequestStatus::kRunning);
  EXPECT_EQ(child->num_computed_tokens, parent->num_computed_tokens);
  EXPECT_EQ(scheduler.kv().metrics().num_used_blocks, used);  // shared, not copied
  const SchedulerOutput out = step(scheduler);
  ASSERT_NE(chunk_of(out, child), nullptr);
  int32_t copies = 0;
  for (const BlockCopy& copy : out.block_copies) copies += copy.direction == BlockCopyDirection::kDeviceToDevice;
  EXPECT_EQ(copies, 1);  // whichever writes first into the shared partial block copies it
  EXPECT_NE(chunk_of(out, parent)->block_table.back(), chunk_of(out, child)->block_table.back());
  EXPECT_EQ(chunk_of(out, parent)->block_table.front(), chunk_of(out, child)->block_table.front());
}

// Admission that keeps room for growth (SchedulerConfig::admission_reserve): 8 requests of 8
// prompt tokens and 24 outputs each need 64 blocks at full length, the pool has 24. Admitting
// whatever fits now preempts (and redoes prefills); keeping every running request's remaining
// output free (ratio 1, no decay) admits fewer at once and never preempts. Both finish all 8.
TEST_F(SchedulerTest, AdmissionThatKeepsRoomToGrowDoesNotPreempt) {
  for (const double reserve : {0.0, 1.0}) {
    SchedulerConfig config{64, 16, PreemptionMode::kRecompute};
    config.admission_reserve = reserve;
    config.admission_reserve_floor = reserve;
    Scheduler scheduler(config, kv(24));
    const std::vector<Request*> requests = add_requests(scheduler, 8, 8, 24);
    const auto [finished, most_running] = run_to_the_end(scheduler, requests);
    EXPECT_EQ(finished, 8) << "reserve " << reserve;
    EXPECT_EQ(scheduler.kv().metrics().num_used_blocks, 0);
    if (reserve == 0.0) {
      EXPECT_GT(scheduler.num_preemptions(), 0) << "the workload must need preemption without the reserve";
    } else {
      EXPECT_EQ(scheduler.num_preemptions(), 0);
      EXPECT_LE(most_running, 3);  // 32 tokens = 8 blocks each at full length: 3 fit in 24
    }
  }
}

// A pool of a residual format with the staging overlay (kv/block_pool.h): plain blocks of 4
// tokens, and staging blocks each holding the memory of 5 more blocks (KIVI-2's ratio is 5.33).
KvCacheConfig overlay_pool(int32_t plain_blocks, int32_t staging_blocks) {
  KvCacheConfig pool{plain_blocks + 1, 4, 0, true};
  pool.num_staging_blocks = staging_blocks;
  pool.num_overlay_blocks = staging_blocks * 5;
  pool.bytes_per_staging_block = 200;
  pool.bytes_per_block = 40;
  return pool;
}

// Every running sequence's staging block holds memory sealed blocks would use. 8 requests of 4
// prompt tokens and 8 outputs need 3 blocks each at full length plus their staging (5); the pool
// holds 28 blocks while no staging block is lent. Admission that counted blocks alone preempted
// 3 times here; counting the staging block, it never does.
TEST_F(SchedulerTest, AdmissionCountsTheStagingBlockOfAResidualFormat) {
  SchedulerConfig config{64, 16, PreemptionMode::kRecompute};
  config.admission_reserve = 1.0;
  config.admission_reserve_floor = 1.0;
  Scheduler scheduler(config, overlay_pool(8, 4));
  ASSERT_EQ(scheduler.kv().device_pool().blocks_per_staging(), 5);
  EXPECT_EQ(run_to_the_end(scheduler, add_requests(scheduler, 8, 4, 8)).finished, 8);
  EXPECT_EQ(scheduler.num_preemptions(), 0);
  EXPECT_GT(scheduler.kv().metrics().num_overlay_allocations, 0);
  EXPECT_EQ(scheduler.kv().metrics().num_used_blocks, 0);
}

// A chunk of a residual format needs a staging block for each of its blocks at once. Here a
// request preempted by recompute comes back with 31 tokens and its first 2 blocks in the prefix
// cache: a 16-token chunk needs all 4 staging blocks, which leave no overlay block free, and the
// 2 plain blocks beside its prefix are too few. Nothing else runs, so nothing would ever free
// room: the chunk shrinks to what fits instead of waiting forever (no admission reserve, as on
// the CPU).
TEST_F(SchedulerTest, AResidualChunkThatCannotFitAnEmptyPoolShrinks) {
  Scheduler scheduler(SchedulerConfig{64, 16, PreemptionMode::kRecompute}, overlay_pool(4, 4));
  EXPECT_EQ(run_to_the_end(scheduler, add_requests(scheduler, 8, 8, 24)).finished, 8);
  EXPECT_GT(scheduler.num_preemptions(), 0);
  EXPECT_EQ(scheduler.kv().metrics().num_used_blocks, 0);
}

// A request without a limit has the whole context as max_tokens; admission counts at most
// kGrowthEstimateCap of it, so it does not keep the next request out of a pool with room.
TEST_F(SchedulerTest, AdmissionCountsAtMostTheCapOfARequestsGrowth) {
  SchedulerConfig config{64, 16, PreemptionMode::kRecompute};
  config.admission_reserve = 1.0;
  config.admission_reserve_floor = 1.0;
  Scheduler scheduler(config, kv(2048));  // 8,192 slots
  Request* unbounded = make(8, 100000);
  Request* small = make(8, 8, 100);
  scheduler.add(unbounded);
  step(scheduler);
  scheduler.add(small);
  const SchedulerOutput out = step(scheduler);
  ASSERT_NE(chunk_of(out, small), nullptr) << "4,096 reserved for the first leaves room for the second";
  EXPECT_EQ(scheduler.num_running(), 2);
  // The capped reserve still counts: a request that needs 8 + 4,096 does not fit beside the
  // first one's 4,096 in what is left of 8,192.
  Request* big = make(8, 4096, 200);
  Request* bigger = make(8, 4096, 300);
  scheduler.add(big);
  scheduler.add(bigger);
  step(scheduler);
  EXPECT_EQ(scheduler.num_running(), 2) << "8,192 slots do not hold two reserves of 4,096 and the running tokens";
}

TEST_F(SchedulerTest, FinishFreesAtOnceFromAnyQueue) {
  Scheduler scheduler(SchedulerConfig{8, 8, PreemptionMode::kRecompute}, kv(64));
  Request* running = make(4, 8);
  Request* waiting = make(20, 8, 60);
  scheduler.add(running);
  step(scheduler);
  scheduler.add(waiting);
  scheduler.finish(running, FinishReason::kAbort);
  scheduler.finish(waiting, FinishReason::kAbort);
  EXPECT_FALSE(scheduler.has_work());
  EXPECT_EQ(scheduler.kv().metrics().num_used_blocks, 0);
  EXPECT_EQ(waiting->status, RequestStatus::kFinished);
  EXPECT_TRUE(step(scheduler).empty());
}

TEST_F(SchedulerTest, OutputPrintsWhatItSchedules) {
  Scheduler scheduler(SchedulerConfig{64, 8, PreemptionMode::kRecompute}, kv(64));
  Request* r = make(5);
  scheduler.add(r);
  const std::string text = scheduler.schedule().to_string();
  EXPECT_NE(text.find("req " + std::to_string(r->id) + " @0 +5 sample"), std::string::npos) << text;
}

TEST_F(SchedulerTest, WhileRequestsDecodeAStepCarriesAtMostTheCappedPromptTokens) {
  SchedulerConfig config{64, 8, PreemptionMode::kRecompute};
  config.max_prefill_tokens_while_decoding = 12;
  Scheduler scheduler(config, kv(128));
  Request* a = make(40, 16);
  scheduler.add(a);
  // Nothing decodes yet: the prompt takes the whole budget.
  SchedulerOutput out = step(scheduler);
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].num_new_tokens, 40);
  Request* b = make(30, 4, 100);
  Request* c = make(30, 4, 200);
  scheduler.add(b);
  scheduler.add(c);
  // a decodes: b's first chunk is cut to the cap and c waits for prompt room.
  out = step(scheduler);
  ASSERT_EQ(out.chunks.size(), 2u);
  EXPECT_EQ(out.chunks[0].request, a);
  EXPECT_EQ(out.chunks[0].num_new_tokens, 1);
  EXPECT_EQ(out.chunks[1].request, b);
  EXPECT_EQ(out.chunks[1].num_new_tokens, 12);
  EXPECT_EQ(c->status, RequestStatus::kWaiting);
  // b's unfinished prompt keeps drawing on the cap, a still decodes every step.
  out = step(scheduler);
  ASSERT_NE(chunk_of(out, a), nullptr);
  ASSERT_NE(chunk_of(out, b), nullptr);
  EXPECT_EQ(chunk_of(out, b)->num_new_tokens, 12);
  EXPECT_EQ(chunk_of(out, c), nullptr);
  out = step(scheduler);
  ASSERT_NE(chunk_of(out, b), nullptr);
  EXPECT_EQ(chunk_of(out, b)->num_new_tokens, 6);  // b's last 6, then c's first 6
  ASSERT_NE(chunk_of(out, c), nullptr);
  EXPECT_EQ(chunk_of(out, c)->num_new_tokens, 6);
  EXPECT_EQ(out.num_batched_tokens, 1 + 12);
}

TEST_F(SchedulerTest, WithoutThePrefillCapAPromptTakesTheBudgetBesideDecodes) {
  Scheduler scheduler(SchedulerConfig{64, 8, PreemptionMode::kRecompute}, kv(128));
  Request* a = make(10, 16);
  scheduler.add(a);
  step(scheduler);
  Request* b = make(50, 4, 100);
  scheduler.add(b);
  const SchedulerOutput out = step(scheduler);
  ASSERT_NE(chunk_of(out, b), nullptr);
  EXPECT_EQ(chunk_of(out, b)->num_new_tokens, 50);
}

}  // namespace
}  // namespace folio
