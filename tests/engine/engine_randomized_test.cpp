// Randomized invariant test for the whole engine (issue 3): on a tiny random-weight Llama model
// (and a Gemma-3-shaped one, local and global layers),
// each configuration runs 10,000+ random operations (add a request, step, abort) with prompts
// that share prefixes, parallel sampling (n > 1: forks), beam search (forks every step), stop
// strings, priorities, greedy and seeded sampling, and a KV pool small enough that preemption
// (by recompute, or by swap to a host pool) happens all the time. After every operation:
//   - Engine::check_invariants(): no block leaked or freed twice, every block's ref count equals
//     the number of tables holding it, tables cover exactly their tokens, request states agree
//     with the KV manager;
//   - the metrics add up (used + free = all blocks, queues = unfinished requests);
//   - the outputs obey the API (no output after a request finished, lengths, stop reasons).
// At the end the engine drains and the pool must be empty again. "Every token's K/V sits at the
// slot its table names" is checked end to end: a sample of the finished deterministic requests
// (greedy or seeded; plain, n > 1 and beam search) is run again alone in a fresh, roomy engine,
// and must give the same tokens. The kernels compute each row independently of the batch, so
// any K/V read from a wrong slot (bad prefix hit, missed copy-on-write, bad swap) would change
// the tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "support/tiny_engine_fixture.h"

namespace folio {
namespace {

using testing::Counts;
using testing::Kind;
using testing::RandomizedEngineConfig;
using testing::Speculation;
using testing::TinyEngineTest;
using testing::Tracked;

// Runs the configuration with another seed (to search for failures, or reproduce one):
//   FOLIO_ENGINE_RANDOMIZED_SEED=17 ./folio_tests --gtest_filter='*EngineRandomized*'
// FOLIO_ENGINE_RANDOMIZED_BEAMS=1 adds beam search to every configuration.
RandomizedEngineConfig with_overrides(RandomizedEngineConfig c) {
  if (const char* seed = std::getenv("FOLIO_ENGINE_RANDOMIZED_SEED"); seed != nullptr && *seed != '\0') {
    c.seed = static_cast<uint32_t>(std::strtoul(seed, nullptr, 10));
  }
  if (const char* beams = std::getenv("FOLIO_ENGINE_RANDOMIZED_BEAMS"); beams != nullptr && *beams == '1') {
    c.beam_search = true;
  }
  return c;
}

constexpr int64_t kOperationsPerRun = 10'000;
constexpr int32_t kMaxLiveRequests = 20;
constexpr int32_t kMaxReplaysPerKind = 16;  // requests re-run alone, per kind (plain, n > 1, beam)

class EngineRandomized : public TinyEngineTest, public ::testing::WithParamInterface<RandomizedEngineConfig> {};

TEST_P(EngineRandomized, InvariantsHoldUnderRandomWorkload) {
  const RandomizedEngineConfig c = with_overrides(GetParam());
  SpeculativeEngine speculative = make_engine(engine_config(c), c);
  Engine& engine = speculative.cpu->engine;
  // The null block besides; a Gemma pool's blocks hold one group's layers (a third of them).
  const int32_t num_blocks = c.num_blocks * kv_groups_of(model_for(c.kv_format, c.gemma).config()).num_groups();
  ASSERT_EQ(engine.num_kv_blocks(), num_blocks + 1);
  // std::mt19937's numbers are specified, the standard distributions' are not: drawn by hand so
  // that a seed gives the same workload with any standard library.
  std::mt19937 rng(c.seed);
  auto unit = [&] { return static_cast<double>(rng()) / 4294967296.0; };  // [0, 1)
  auto uniform = [&](int32_t lo, int32_t hi) {                            // [lo, hi]
    return lo + static_cast<int32_t>(rng() % static_cast<uint32_t>(hi - lo + 1));
  };
  auto chance = [&](double p) { return unit() < p; };
  auto random_tokens = [&](int32_t length) {
    std::vector<int32_t> tokens(length);
    for (int32_t& token : tokens) token = uniform(1, testing::kTinyVocabSize - 1);
    return tokens;
  };

  // "System prompts" that new prompts start with, so that prefixes are shared (and hit).
  std::vector<std::vector<int32_t>> prefixes;
  for (int32_t length : {0, 3, 9, 16, 21, 37}) prefixes.push_back(random_tokens(length));
  std::vector<std::vector<int32_t>> past_prompts;
  const std::vector<std::string> stop_strings = {"e", "t", " ", "th", "in", "a", "er", "o"};

  std::map<RequestId, Tracked> tracked;
  Counts counts;
  auto live_ids = [&] {
    std::vector<RequestId> ids;
    for (const auto& [id, t] : tracked) {
      if (!t.done) ids.push_back(id);
    }
    return ids;
  };

  auto add = [&](std::ostringstream& what) {
    std::vector<int32_t> prompt;
    if (!past_prompts.empty() && chance(0.1)) {
      prompt = past_prompts[uniform(0, static_cast<int32_t>(past_prompts.size()) - 1)];  // all of it cached
    } else {
      prompt = prefixes[uniform(0, static_cast<int32_t>(prefixes.size()) - 1)];
      const std::vector<int32_t> suffix = random_tokens(uniform(1, 24));
      prompt.insert(prompt.end(), suffix.begin(), suffix.end());
    }
    past_prompts.push_back(prompt);
    RequestParams params;
    params.max_tokens = chance(0.2) ? uniform(1, 4) : uniform(5, 24);
    params.ignore_eos = chance(0.5);
    params.priority = chance(0.3) ? uniform(-1, 2) : 0;
    Kind kind = Kind::kPlain;
    const double r = unit();
    if (r < 0.2) {
      kind = Kind::kParallel;
      params.n = uniform(2, 4);
    } else if (r < 0.32 && c.beam_search) {
      kind = Kind::kBeam;
      params.beam_width = uniform(2, 3);
      params.length_penalty = chance(0.5) ? 1.0f : 0.5f;
      params.early_stopping = chance(0.5);
    }
    if (chance(0.5)) {
      params.sampling.temperature = 0.0f;
    } else {
      params.sampling.temperature = chance(0.5) ? 0.7f : 1.3f;
      params.sampling.seed = rng();
      if (chance(0.3)) params.sampling.top_k = uniform(1, 40);
      if (chance(0.3)) params.sampling.top_p = 0.9f;
    }
    if (chance(0.2)) params.sampling.logprobs = uniform(0, 3);
    if (kind != Kind::kBeam && chance(0.2))
      params.stop = {stop_strings[uniform(0, static_cast<int32_t>(stop_strings.size()) - 1)]};
    if (chance(0.1)) params.stop_token_ids = {uniform(1, testing::kTinyVocabSize - 1)};
    Expected<RequestId> id = engine.add_request(prompt, params);
    ASSERT_TRUE(id) << id.error();
    what << "add " << *id << " (" << prompt.size() << " prompt tokens, max " << params.max_tokens << ", n " << params.n
         << ", beam " << params.beam_width << ", priority " << params.priority << ")";
    Tracked& t = tracked[*id];
    t.prompt = std::move(prompt);
    t.params = std::move(params);
    t.kind = kind;
    ++counts.adds;
    if (kind == Kind::kParallel) ++counts.parallel_requests;
    if (kind == Kind::kBeam) ++counts.beam_requests;
  };

  auto check = [&](const std::string& where) {
    const Status status = engine.check_invariants();
    ASSERT_TRUE(status) << where << ": " << status.message();
    const EngineMetrics m = engine.metrics();
    // Overlay ids (residual formats) under a lent staging block are neither used nor free.
    ASSERT_GE(m.kv.num_used_blocks + m.kv.num_free_blocks, num_blocks) << where;
    ASSERT_LE(m.kv.num_used_blocks + m.kv.num_free_blocks, num_blocks + m.kv.num_overlay_blocks) << where;
    ASSERT_EQ(m.kv.num_sequences, m.num_running + m.num_swapped) << where;
    ASSERT_EQ(m.kv.num_swapped_sequences, m.num_swapped) << where;
    // Admission and swap-in respect max_num_seqs, but the n - 1 siblings of parallel sampling
    // and the forks of beam search join the running set past it (see the report on issue 3):
    // bound it by what the live fork families can add.
    int32_t fork_allowance = 0;
    for (const auto& [id, t] : tracked) {
      if (!t.done) fork_allowance += std::max(t.params.n, t.params.beam_width) - 1;
    }
    ASSERT_LE(m.num_running, c.max_num_seqs + fork_allowance) << where;
    counts.max_seqs_exceeded = std::max<int64_t>(counts.max_seqs_exceeded, m.num_running - c.max_num_seqs);
    if (c.preemption_mode == PreemptionMode::kRecompute) {
      ASSERT_EQ(m.num_swapped, 0) << where;
    }
    counts.max_waiting = std::max<int64_t>(counts.max_waiting, m.num_waiting);
    counts.max_swapped = std::max<int64_t>(counts.max_swapped, m.num_swapped);
    counts.max_running = std::max<int64_t>(counts.max_running, m.num_running);
  };

  while (counts.operations < kOperationsPerRun) {
    std::ostringstream what;
    const std::vector<RequestId> live = live_ids();
    const int32_t num_live = static_cast<int32_t>(live.size());
    const double r = unit();
    if (num_live < 2 || (r < 0.3 && num_live < kMaxLiveRequests)) {
      add(what);
    } else if (r < 0.36) {
      if (chance(0.85)) {
        const RequestId id = live[uniform(0, num_live - 1)];
        what << "abort " << id;
        ASSERT_TRUE(engine.abort(id)) << "seed " << c.seed << ", op " << counts.operations << ": " << what.str();
        tracked.at(id).aborted = true;
        tracked.at(id).done = true;
        ++counts.aborts;
      } else {
        // A finished request, or one that never existed: nothing to abort.
        RequestId id = 1'000'000'000;
        for (const auto& [known, t] : tracked) {
          if (t.done && chance(0.3)) id = known;
        }
        what << "abort finished " << id;
        ASSERT_FALSE(engine.abort(id)) << "seed " << c.seed << ", op " << counts.operations << ": " << what.str();
        ++counts.rejected_aborts;
      }
    } else {
      what << "step";
      ++counts.steps;
      const std::vector<RequestOutput> outputs = engine.step();
      absorb(outputs, tracked, &counts, "seed " + std::to_string(c.seed) + ", op " + std::to_string(counts.operations));
    }
    ++counts.operations;
    check("seed " + std::to_string(c.seed) + ", op " + std::to_string(counts.operations - 1) + " (" + what.str() + ")");
    if (::testing::Test::HasFatalFailure()) return;
  }

  // Drain: every request ends; one more step lets the engine forget the aborted ones.
  int64_t drain_steps = 0;
  while (engine.has_unfinished_requests()) {
    if (drain_steps++ == 20'000) {
      const EngineMetrics stuck = engine.metrics();
      std::ostringstream live;
      for (const auto& [id, t] : tracked) {
        if (t.done) continue;
        live << " " << id
             << (t.kind == Kind::kBeam       ? "(beam "
                 : t.kind == Kind::kParallel ? "(n "
                                             : "(")
             << std::max(t.params.n, t.params.beam_width) << ", " << t.prompt.size() << "+" << t.params.max_tokens
             << " tokens)";
      }
      FAIL() << "seed " << c.seed << ": the engine makes no progress: running " << stuck.num_running << ", waiting "
             << stuck.num_waiting << ", swapped " << stuck.num_swapped << ", blocks used " << stuck.kv.num_used_blocks
             << " of " << num_blocks << ", host blocks used " << stuck.kv.num_used_host_blocks
             << "; unfinished requests:" << live.str();
    }
    absorb(engine.step(), tracked, &counts, "drain");
    ++counts.operations;
    check("drain step " + std::to_string(drain_steps));
    if (::testing::Test::HasFatalFailure()) return;
  }
  absorb(engine.step(), tracked, &counts, "final step");
  ++counts.operations;
  check("final step");
  for (const auto& [id, t] : tracked) EXPECT_TRUE(t.done) << "request " << id << " never finished";

  const EngineMetrics m = engine.metrics();
  EXPECT_EQ(m.kv.num_used_blocks, 0);
  EXPECT_EQ(m.kv.num_free_blocks, num_blocks + m.kv.num_overlay_blocks);
  EXPECT_EQ(m.kv.num_used_overlay_blocks, 0);
  EXPECT_EQ(m.kv.num_sequences, 0);
  EXPECT_EQ(m.kv.num_used_host_blocks, 0);
  EXPECT_EQ(m.num_running + m.num_waiting + m.num_swapped, 0);
  EXPECT_EQ(m.kv.num_tokens_held, 0);
  if (speculative.proposer != nullptr) {
    EXPECT_EQ(speculative.proposer->num_used_blocks(), 0);  // the draft's pool is empty too
    EXPECT_GT(m.speculation.num_accepted_tokens, 0);
  }

  // The workload really exercised what it is meant to.
  EXPECT_GE(counts.operations, kOperationsPerRun);
  EXPECT_GT(m.num_preemptions, 0);
  EXPECT_GT(m.kv.num_copy_on_write_blocks, 0);
  EXPECT_GT(counts.aborts, 0);
  EXPECT_GT(counts.parallel_requests, 0);
  if (c.beam_search) {
    EXPECT_GT(counts.beam_requests, 0);
  }
  EXPECT_GT(counts.finished_stop_string, 0);
  EXPECT_GT(counts.max_waiting, 0);
  // Residual formats: sealed blocks used idle staging blocks' bytes (kv/block_pool.h).
  EXPECT_EQ(m.kv.num_overlay_allocations > 0, kv_format_has_residual(c.kv_format));
  if (c.preemption_mode == PreemptionMode::kSwap) {
    EXPECT_GT(m.kv.num_swapped_out_blocks, 0);
    EXPECT_GT(m.kv.num_swapped_in_blocks, 0);
  }
  if (c.enable_prefix_caching) {
    EXPECT_GT(m.kv.prefix_cache.num_hit_blocks, 0);
  } else {
    EXPECT_EQ(m.kv.prefix_cache.num_hit_blocks, 0);
  }

  // Batch invariance: deterministic requests that finished normally give the same tokens alone.
  std::map<Kind, int32_t> replayed;
  for (const auto& [id, t] : tracked) {
    if (t.aborted) continue;
    const bool deterministic = t.params.sampling.is_greedy() || t.params.sampling.seed.has_value();
    if (!deterministic || replayed[t.kind] >= kMaxReplaysPerKind) continue;
    ++replayed[t.kind];
    ++counts.replays;
    const Tracked alone = run_alone(t, c.block_size, c.kv_format, c.gemma, c.tensor_parallel);
    EXPECT_EQ(alone.tokens, t.tokens) << "request " << id << " (n " << t.params.n << ", beam " << t.params.beam_width
                                      << ") differs from the same request alone";
    EXPECT_EQ(alone.finished, t.finished) << "request " << id;
    EXPECT_EQ(alone.text, t.text) << "request " << id;
  }
  EXPECT_GT(replayed[Kind::kPlain], 0);
  EXPECT_GT(replayed[Kind::kParallel], 0);
  if (c.beam_search) {
    EXPECT_GT(replayed[Kind::kBeam], 0);
  }

  std::printf(
      "[ %s seed %u ] %lld ops (%lld adds, %lld steps, %lld aborts, %lld no-op aborts), %lld n>1 and "
      "%lld beam requests; preemptions %lld, swapped out/in %lld/%lld blocks, prefix hits %lld of "
      "%lld blocks, copy-on-write %lld blocks; finished: %lld length, %lld stop token, %lld stop "
      "string; peak running/waiting/swapped %lld/%lld/%lld (running past max_num_seqs by up to %lld); "
      "%lld replays; %lld overlay blocks handed out\n",
      c.name, c.seed, static_cast<long long>(counts.operations), static_cast<long long>(counts.adds),
      static_cast<long long>(counts.steps), static_cast<long long>(counts.aborts),
      static_cast<long long>(counts.rejected_aborts), static_cast<long long>(counts.parallel_requests),
      static_cast<long long>(counts.beam_requests), static_cast<long long>(m.num_preemptions),
      static_cast<long long>(m.kv.num_swapped_out_blocks), static_cast<long long>(m.kv.num_swapped_in_blocks),
      static_cast<long long>(m.kv.prefix_cache.num_hit_blocks),
      static_cast<long long>(m.kv.prefix_cache.num_query_blocks), static_cast<long long>(m.kv.num_copy_on_write_blocks),
      static_cast<long long>(counts.finished_length), static_cast<long long>(counts.finished_stop_token),
      static_cast<long long>(counts.finished_stop_string), static_cast<long long>(counts.max_running),
      static_cast<long long>(counts.max_waiting), static_cast<long long>(counts.max_swapped),
      static_cast<long long>(counts.max_seqs_exceeded), static_cast<long long>(counts.replays),
      static_cast<long long>(m.kv.num_overlay_allocations));
}

// About 256 token slots of device KV for up to 20 live requests of up to 88 tokens each (n and
// beam requests several times that): the pool runs out all the time.
//
// kBeamSearchWithRecompute: for now beam search runs only where every preemption is a swap (a
// host pool larger than the device pool). The engine schedules and preempts a beam group's beams
// one by one, and then (1) a beam preempted by recompute while it waits for the rest of its group
// is forked while it has no blocks (KvCacheManager::fork on an unknown sequence: a crash), and
// (2) two groups can each hold one scored beam's blocks while their other beams wait for room (a
// deadlock). A third bug (3) hangs some swap runs too, though not with these seeds: a group made
// ready by a swap-in in an otherwise empty step is never advanced. EngineSchedulingBugs
// below has minimal cases of each, disabled until the engine is fixed; then set this to true.
constexpr bool kBeamSearchWithRecompute = true;
INSTANTIATE_TEST_SUITE_P(
    Configs, EngineRandomized,
    ::testing::Values(
        RandomizedEngineConfig{"Block16PrefixRecompute", 16, true, PreemptionMode::kRecompute, 16, 0, 64, 16,
                               kBeamSearchWithRecompute, 1},
        RandomizedEngineConfig{"Block4PrefixSwap", 4, true, PreemptionMode::kSwap, 64, 128, 48, 16, true, 2},
        RandomizedEngineConfig{"Block4NoPrefixRecompute", 4, false, PreemptionMode::kRecompute, 64, 0, 32, 8,
                               kBeamSearchWithRecompute, 3},
        RandomizedEngineConfig{"Block16NoPrefixSwap", 16, false, PreemptionMode::kSwap, 16, 32, 128, 16, true, 4},
        // A host pool too small for every victim: some preemptions fall back to recompute.
        RandomizedEngineConfig{"Block4PrefixSmallSwap", 4, true, PreemptionMode::kSwap, 64, 24, 64, 12,
                               kBeamSearchWithRecompute, 5},
        RandomizedEngineConfig{"Block16PrefixSwap", 16, true, PreemptionMode::kSwap, 16, 32, 40, 16, true, 6},
        // The quantized cache formats (issue 12): prefix hits reuse quantized blocks as they are,
        // forks and swaps copy them, recompute writes them again, all bit-identical to alone.
        RandomizedEngineConfig{"Block16PrefixSwapFp8", 16, true, PreemptionMode::kSwap, 16, 32, 40, 16, true, 7,
                               KvFormat::kFp8E4M3},
        RandomizedEngineConfig{"Block4PrefixRecomputeInt8", 4, true, PreemptionMode::kRecompute, 64, 0, 48, 16,
                               kBeamSearchWithRecompute, 8, KvFormat::kInt8},
        RandomizedEngineConfig{"Block8PrefixSwapBf16", 8, true, PreemptionMode::kSwap, 32, 32, 40, 16, true, 11,
                               KvFormat::kBf16},
        // KIVI: blocks of 32 (the residual window), unsealed ones moving with their staging.
        RandomizedEngineConfig{"Block32PrefixSwapKivi4", 32, true, PreemptionMode::kSwap, 10, 8, 40, 16, true, 9,
                               KvFormat::kKivi4},
        RandomizedEngineConfig{"Block32PrefixRecomputeKivi2", 32, true, PreemptionMode::kRecompute, 10, 0, 48, 16,
                               kBeamSearchWithRecompute, 10, KvFormat::kKivi2},
        // Speculative decoding (issue 14) with every paged feature: rejected proposals' slots
        // given back, the draft's blocks freed with the target's, proposals stopping short of a
        // KIVI block's seal.
        RandomizedEngineConfig{"Block16PrefixRecomputeDraft", 16, true, PreemptionMode::kRecompute, 16, 0, 64, 16,
                               kBeamSearchWithRecompute, 12, KvFormat::kFp16, Speculation::kDraft},
        RandomizedEngineConfig{"Block4PrefixSwapNgram", 4, true, PreemptionMode::kSwap, 64, 128, 48, 16, true, 13,
                               KvFormat::kFp16, Speculation::kNgram},
        RandomizedEngineConfig{"Block32PrefixSwapKivi4Draft", 32, true, PreemptionMode::kSwap, 10, 8, 40, 16, true, 14,
                               KvFormat::kKivi4, Speculation::kDraft},
        // Gemma 3's shape: local layers whose 8-token window ends inside blocks and across them.
        RandomizedEngineConfig{"Gemma3Block4PrefixSwap", 4, true, PreemptionMode::kSwap, 64, 128, 48, 16, true, 15,
                               KvFormat::kFp16, Speculation::kNone, true},
        RandomizedEngineConfig{"Gemma3Block16PrefixRecomputeNgram", 16, true, PreemptionMode::kRecompute, 16, 0, 64, 16,
                               false, 16, KvFormat::kFp16, Speculation::kNgram, true},
        RandomizedEngineConfig{"Gemma3Block32PrefixSwapKivi4", 32, true, PreemptionMode::kSwap, 10, 8, 40, 16, true, 17,
                               KvFormat::kKivi4, Speculation::kNone, true},
        // Tensor parallelism (issue 19): one KV manager's block tables over ranks that each hold
        // their heads of every block: prefix hits, forks, swaps and recomputes on every rank at
        // once. Two ranks of two KV heads; three ranks over two KV heads (one replicated, FFN
        // and vocabulary split unevenly); Gemma's one KV head on both ranks, KIVI blocks sealed
        // on each.
        RandomizedEngineConfig{"Block16PrefixSwapTp2", 16, true, PreemptionMode::kSwap, 16, 32, 40, 16, true, 18,
                               KvFormat::kFp16, Speculation::kNone, false, 2},
        RandomizedEngineConfig{"Block4PrefixRecomputeInt8Tp3", 4, true, PreemptionMode::kRecompute, 64, 0, 48, 16,
                               kBeamSearchWithRecompute, 19, KvFormat::kInt8, Speculation::kNone, false, 3},
        RandomizedEngineConfig{"Gemma3Block32PrefixSwapKivi4Tp2", 32, true, PreemptionMode::kSwap, 10, 8, 40, 16, true,
                               20, KvFormat::kKivi4, Speculation::kNone, true, 2}),
    [](const ::testing::TestParamInfo<RandomizedEngineConfig>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace folio
