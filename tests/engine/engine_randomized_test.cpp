// Randomized invariant test for the whole engine (issue 3): on a tiny random-weight Llama model,
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
#include <memory>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "engine/spec/draft_model_proposer.h"
#include "engine/spec/ngram_proposer.h"
#include "support/cpu_engine.h"
#include "support/tiny_model.h"

namespace folio {
namespace {

enum class Speculation { kNone, kNgram, kDraft };

struct RandomizedEngineConfig {
  const char* name;
  int32_t block_size;
  bool enable_prefix_caching;
  PreemptionMode preemption_mode;
  int32_t num_blocks;       // device KV blocks (about 256 token slots: far less than the load)
  int32_t num_host_blocks;  // swap space in blocks (0: none)
  int32_t max_num_batched_tokens;
  int32_t max_num_seqs;
  bool beam_search;  // add beam-search requests too (see kBeamSearchWithRecompute)
  uint32_t seed;
  KvFormat kv_format = KvFormat::kFp16;  // quantized formats: blocks move as opaque bytes all the same
  // Speculative decoding (k = 4, fixed): n-gram lookup, or the model drafting for itself (every
  // proposal accepted that greedy decoding would give: long runs through stop strings and
  // max_tokens) with a draft pool as tight as the target's.
  Speculation speculation = Speculation::kNone;
};

void PrintTo(const RandomizedEngineConfig& c, std::ostream* os) {
  *os << c.name << " seed " << c.seed;
}

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

enum class Kind { kPlain, kParallel, kBeam };

// What the test knows of one request it added.
struct Tracked {
  std::vector<int32_t> prompt;
  RequestParams params;
  Kind kind = Kind::kPlain;
  std::map<int32_t, std::vector<int32_t>> tokens;  // by index (beam: by rank)
  std::map<int32_t, std::string> text;
  std::map<int32_t, FinishReason> finished;  // indexes that finished
  bool aborted = false;
  bool done = false;  // every index finished, or aborted
};

struct Counts {
  int64_t operations = 0, adds = 0, steps = 0, aborts = 0, rejected_aborts = 0;
  int64_t parallel_requests = 0, beam_requests = 0;
  int64_t finished_stop_string = 0, finished_stop_token = 0, finished_length = 0;
  int64_t max_waiting = 0, max_swapped = 0, max_running = 0;
  int64_t replays = 0;
  int64_t max_seqs_exceeded = 0;  // running sequences past max_num_seqs, at most
};

// The tiny model, a one-thread CPU backend, and checks shared by the tests below.
class TinyEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto tiny = testing::TinyModel::create();
    ASSERT_TRUE(tiny) << tiny.error();
    tiny_ = std::move(tiny).value().release();
    // KIVI groups 32 channels: the same model shape with 32-wide heads (2 query heads over 1 KV head).
    auto wide = testing::TinyModel::create({.head_count = 2, .head_count_kv = 1, .rope_dimension_count = 32});
    ASSERT_TRUE(wide) << wide.error();
    wide_ = std::move(wide).value().release();
    backend_ = new cpu::CpuBackend(1);
  }
  static void TearDownTestSuite() {
    delete backend_;
    delete tiny_;
    delete wide_;
    wide_ = nullptr;
    backend_ = nullptr;
    tiny_ = nullptr;
  }

  static int64_t block_bytes(int32_t block_size, KvFormat format = KvFormat::kFp16) {
    return kv_bytes_per_block(model_for(format).config(), block_size, format);
  }

  // The engine's knobs and the CPU executor's pool.
  struct Setup {
    EngineConfig config;
    KvCacheOptions kv;
  };

  static Setup engine_config(const RandomizedEngineConfig& c) {
    Setup setup;
    setup.kv.block_size = c.block_size;
    setup.kv.format = c.kv_format;
    setup.kv.kv_cache_bytes = c.num_blocks * block_bytes(c.block_size, c.kv_format);
    setup.kv.swap_space_bytes = c.num_host_blocks * block_bytes(c.block_size, c.kv_format);
    setup.config.enable_prefix_caching = c.enable_prefix_caching;
    setup.config.scheduler.preemption_mode = c.preemption_mode;
    setup.config.scheduler.max_num_batched_tokens = c.max_num_batched_tokens;
    setup.config.scheduler.max_num_seqs = c.max_num_seqs;
    add_staging(setup);
    return setup;
  }

  static ModelWeights& model_for(KvFormat format) {
    return kv_format_has_residual(format) ? wide_->model() : tiny_->model();
  }

  // Residual formats' staging blocks come out of the pool's budget: add them on top.
  static void add_staging(Setup& setup) {
    if (!kv_format_has_residual(setup.kv.format)) return;
    setup.kv.num_staging_blocks = kv_staging_blocks_for(
        setup.config.scheduler.max_num_seqs, setup.config.scheduler.max_num_batched_tokens, setup.kv.block_size);
    const int64_t staging_bytes = static_cast<int64_t>(setup.kv.num_staging_blocks) *
                                  static_cast<int64_t>(kv_cache_shape(model_for(setup.kv.format).config(), 1,
                                                                      setup.kv.block_size, setup.kv.format)
                                                           .bytes_per_staging_block());
    setup.kv.kv_cache_bytes += staging_bytes;
    if (setup.kv.swap_space_bytes > 0) setup.kv.swap_space_bytes += staging_bytes;
  }

  static std::unique_ptr<testing::CpuEngine> make_engine(const Setup& setup) {
    return std::make_unique<testing::CpuEngine>(model_for(setup.kv.format), *backend_, tiny_->tokenizer(), setup.config,
                                                setup.kv);
  }

  // An engine with a proposer (which must outlive it: declared first).
  struct SpeculativeEngine {
    std::unique_ptr<cpu::CpuExecutor> draft;
    std::unique_ptr<Proposer> proposer;
    std::unique_ptr<testing::CpuEngine> cpu;
  };
  static SpeculativeEngine make_engine(const Setup& setup, const RandomizedEngineConfig& c) {
    SpeculativeEngine e;
    Setup s = setup;
    if (c.speculation == Speculation::kNgram) {
      e.proposer = std::make_unique<NgramProposer>(NgramConfig{});
    } else if (c.speculation == Speculation::kDraft) {
      e.draft = std::make_unique<cpu::CpuExecutor>(model_for(setup.kv.format), *backend_, c.num_blocks + 1, 16, 0);
      e.proposer = std::make_unique<DraftModelProposer>(*e.draft);
    }
    if (e.proposer != nullptr) {
      s.config.speculative.num_tokens = 4;
      s.config.speculative.adaptive = false;
    }
    e.cpu = std::make_unique<testing::CpuEngine>(model_for(setup.kv.format), *backend_, tiny_->tokenizer(), s.config,
                                                 s.kv, e.proposer.get());
    return e;
  }

  // Folds one step's outputs into the tracked requests, checking what the API promises.
  static void absorb(const std::vector<RequestOutput>& outputs, std::map<RequestId, Tracked>& tracked, Counts* counts,
                     const std::string& where) {
    std::vector<RequestId> beams_finished;
    for (const RequestOutput& out : outputs) {
      auto it = tracked.find(out.id);
      ASSERT_NE(it, tracked.end()) << where << ": output for unknown request " << out.id;
      Tracked& t = it->second;
      if (t.aborted) {
        // Aborted sequences report their end once, in the next step; nothing else comes.
        EXPECT_TRUE(out.finished) << where << ": request " << out.id << " produced after abort";
        EXPECT_EQ(out.finish_reason, FinishReason::kAbort) << where << ": request " << out.id;
        EXPECT_TRUE(out.new_tokens.empty()) << where << ": request " << out.id;
        continue;
      }
      ASSERT_FALSE(t.done) << where << ": output for request " << out.id << " after it finished";
      EXPECT_NE(out.finish_reason, FinishReason::kAbort) << where << ": request " << out.id;
      const int32_t width = t.kind == Kind::kBeam ? t.params.beam_width : t.params.n;
      ASSERT_GE(out.index, 0) << where;
      ASSERT_LT(out.index, width) << where << ": request " << out.id;
      ASSERT_FALSE(t.finished.contains(out.index))
          << where << ": request " << out.id << " index " << out.index << " after it finished";
      EXPECT_EQ(out.num_prompt_tokens, static_cast<int32_t>(t.prompt.size())) << where;
      std::vector<int32_t>& tokens = t.tokens[out.index];
      if (t.kind == Kind::kBeam) {
        // Beam search reports every hypothesis at the end, at once.
        EXPECT_TRUE(out.finished) << where << ": beam request " << out.id << " streamed";
        tokens = out.new_tokens;
        beams_finished.push_back(out.id);
      } else {
        tokens.insert(tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
      }
      t.text[out.index] += out.text_delta;
      EXPECT_EQ(out.num_output_tokens, static_cast<int32_t>(tokens.size())) << where << ": request " << out.id;
      EXPECT_LE(static_cast<int32_t>(tokens.size()), t.params.max_tokens) << where << ": request " << out.id;
      if (!out.finished) continue;
      t.finished[out.index] = out.finish_reason;
      ASSERT_FALSE(tokens.empty()) << where << ": request " << out.id << " finished without a token";
      const std::string& text = t.text[out.index];
      for (const std::string& stop : t.params.stop) {
        EXPECT_EQ(text.find(stop), std::string::npos)
            << where << ": request " << out.id << " returned its stop string '" << stop << "'";
      }
      if (out.finish_reason == FinishReason::kLength) {
        // (A beam search that ends early reports its live beams as length-limited too.)
        if (t.kind != Kind::kBeam) {
          EXPECT_EQ(static_cast<int32_t>(tokens.size()), t.params.max_tokens) << where << ": request " << out.id;
        }
        if (counts) ++counts->finished_length;
      } else {
        ASSERT_EQ(out.finish_reason, FinishReason::kStop) << where << ": request " << out.id;
        const int32_t last = tokens.back();
        const bool stop_token = (!t.params.ignore_eos && tiny_->tokenizer().is_end_of_generation(last)) ||
                                std::find(t.params.stop_token_ids.begin(), t.params.stop_token_ids.end(), last) !=
                                    t.params.stop_token_ids.end();
        if (stop_token) {
          if (counts) ++counts->finished_stop_token;
        } else {
          ASSERT_NE(t.kind, Kind::kBeam) << where << ": beam hypothesis of request " << out.id
                                         << " stopped on a token that does not end it";
          const std::string decoded = tiny_->tokenizer().decode(tokens);
          bool found = false;
          for (const std::string& stop : t.params.stop) found = found || decoded.find(stop) != std::string::npos;
          EXPECT_TRUE(found) << where << ": request " << out.id << " stopped without a stop token or string";
          if (counts) ++counts->finished_stop_string;
        }
      }
      if (t.kind != Kind::kBeam && static_cast<int32_t>(t.finished.size()) == t.params.n) t.done = true;
    }
    for (RequestId id : beams_finished) tracked.at(id).done = true;
  }

  // The request alone in a fresh engine with room for everything.
  static Tracked run_alone(const Tracked& original, int32_t block_size, KvFormat format = KvFormat::kFp16) {
    Setup setup;
    setup.kv.block_size = block_size;
    setup.kv.format = format;
    setup.kv.kv_cache_bytes = (8192 / block_size) * block_bytes(block_size, format);
    add_staging(setup);
    auto cpu = make_engine(setup);
    Engine& engine = cpu->engine;
    std::map<RequestId, Tracked> tracked;
    Expected<RequestId> id = engine.add_request(original.prompt, original.params);
    EXPECT_TRUE(id) << id.error();
    if (!id) return {};
    Tracked& t = tracked[*id];
    t.prompt = original.prompt;
    t.params = original.params;
    t.kind = original.kind;
    for (int i = 0; i < 10'000 && engine.has_unfinished_requests(); ++i) {
      absorb(engine.step(), tracked, nullptr, "alone");
    }
    EXPECT_FALSE(engine.has_unfinished_requests()) << "the request alone did not finish";
    return t;
  }

  // Steps until every request ends (at most max_steps), checking the invariants after each.
  static void run_to_completion(Engine& engine, std::map<RequestId, Tracked>& tracked, int max_steps) {
    for (int step = 0; step < max_steps && engine.has_unfinished_requests(); ++step) {
      absorb(engine.step(), tracked, nullptr, "step " + std::to_string(step));
      const Status status = engine.check_invariants();
      ASSERT_TRUE(status) << "step " << step << ": " << status.message();
      if (::testing::Test::HasFatalFailure()) return;
    }
    ASSERT_FALSE(engine.has_unfinished_requests()) << "no progress in " << max_steps << " steps";
    engine.step();
    const EngineMetrics m = engine.metrics();
    EXPECT_EQ(m.kv.num_used_blocks, 0);
    EXPECT_EQ(m.kv.num_sequences, 0);
  }

  static inline testing::TinyModel* tiny_ = nullptr;
  static inline testing::TinyModel* wide_ = nullptr;
  static inline cpu::CpuBackend* backend_ = nullptr;
};

class EngineRandomized : public TinyEngineTest, public ::testing::WithParamInterface<RandomizedEngineConfig> {};

TEST_P(EngineRandomized, InvariantsHoldUnderRandomWorkload) {
  const RandomizedEngineConfig c = with_overrides(GetParam());
  SpeculativeEngine speculative = make_engine(engine_config(c), c);
  Engine& engine = speculative.cpu->engine;
  ASSERT_EQ(engine.num_kv_blocks(), c.num_blocks + 1);  // the null block besides
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
    ASSERT_EQ(m.kv.num_used_blocks + m.kv.num_free_blocks, c.num_blocks) << where;
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
             << " of " << c.num_blocks << ", host blocks used " << stuck.kv.num_used_host_blocks
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
  EXPECT_EQ(m.kv.num_free_blocks, c.num_blocks);
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
    const Tracked alone = run_alone(t, c.block_size, c.kv_format);
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
      "%lld replays\n",
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
      static_cast<long long>(counts.max_seqs_exceeded), static_cast<long long>(counts.replays));
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
                               KvFormat::kKivi4, Speculation::kDraft}),
    [](const ::testing::TestParamInfo<RandomizedEngineConfig>& info) { return std::string(info.param.name); });

// Minimal cases of the engine bugs the randomized test found (beam search under preemption, and
// max_num_seqs with forks), disabled until the engine is fixed: each should then pass as is.
class EngineSchedulingBugs : public TinyEngineTest {
 protected:
  static Setup tight_config() {  // 4 blocks of 4 tokens, preemption by recompute
    Setup setup;
    setup.kv.block_size = 4;
    setup.kv.kv_cache_bytes = 4 * block_bytes(4);
    setup.config.scheduler.preemption_mode = PreemptionMode::kRecompute;
    return setup;
  }
  static RequestParams beam(int32_t width, int32_t max_tokens, int32_t priority = 0) {
    RequestParams params;
    params.beam_width = width;
    params.max_tokens = max_tokens;
    params.ignore_eos = true;
    params.priority = priority;
    return params;
  }
  static RequestParams greedy(int32_t max_tokens, int32_t priority = 0) {
    RequestParams params = beam(1, max_tokens, priority);
    params.sampling.temperature = 0.0f;
    return params;
  }
  static void add(Engine& engine, std::map<RequestId, Tracked>& tracked, std::vector<int32_t> prompt,
                  const RequestParams& params) {
    Expected<RequestId> id = engine.add_request(prompt, params);
    ASSERT_TRUE(id) << id.error();
    Tracked& t = tracked[*id];
    t.prompt = std::move(prompt);
    t.params = params;
    t.kind = params.beam_width > 1 ? Kind::kBeam : Kind::kPlain;
  }
  static void expect_same_as_alone(const std::map<RequestId, Tracked>& tracked) {
    for (const auto& [id, t] : tracked) {
      const Tracked alone = run_alone(t, 4);
      EXPECT_EQ(alone.tokens, t.tokens) << "request " << id;
      EXPECT_EQ(alone.finished, t.finished) << "request " << id;
    }
  }
};

// A beam that has been scored and waits for the rest of its group is preempted by recompute
// (its blocks freed, the request back in the waiting queue). When the group then advances and
// this beam is the parent of two of the chosen candidates, Engine::fork_request calls
// KvCacheManager::fork on a sequence the manager does not know: a segfault in the Release build
// (an assert in a debug one), in step 8.
TEST_F(EngineSchedulingBugs, BeamPreemptedWhilePendingCanStillBeForked) {
  auto cpu = make_engine(tight_config());
  Engine& engine = cpu->engine;
  std::map<RequestId, Tracked> tracked;
  add(engine, tracked, {10, 11, 12, 13, 14, 15, 16}, beam(2, 4));
  add(engine, tracked, {100}, greedy(8, /*priority=*/-1));  // runs first, preempts the beams
  run_to_completion(engine, tracked, 1000);
  if (HasFatalFailure()) return;
  expect_same_as_alone(tracked);
}

// Two beam groups, each of which fits in the pool alone (2 beams x 2 blocks = 4 blocks): after
// the second step each group has one scored beam that holds 2 blocks while waiting for its
// sibling, and each sibling waits in the queue for blocks the other group holds. Nothing is
// scheduled again: step() returns nothing while has_unfinished_requests() stays true forever
// (generate() would hang).
TEST_F(EngineSchedulingBugs, TwoBeamGroupsThatEachFitDoNotDeadlock) {
  auto cpu = make_engine(tight_config());
  Engine& engine = cpu->engine;
  std::map<RequestId, Tracked> tracked;
  add(engine, tracked, {10, 11, 12, 13}, beam(2, 4));
  absorb(engine.step(), tracked, nullptr, "first step");
  add(engine, tracked, {100, 101, 102, 103}, beam(2, 4, /*priority=*/-1));
  run_to_completion(engine, tracked, 1000);
  if (HasFatalFailure()) return;
  expect_same_as_alone(tracked);
}

// Preemption by swap: a scored beam is swapped out while its group waits, and is swapped back in
// by a step whose schedule is otherwise empty (every other live beam is scored and idle).
// Engine::step() returns early on an empty schedule, before the loop that advances ready beam
// groups, so the group is never advanced: every later step is empty too, and the engine hangs
// with all beams running, scored and resident.
TEST_F(EngineSchedulingBugs, BeamGroupReadyAfterSwapInAdvances) {
  Setup setup;
  setup.kv.block_size = 16;
  setup.kv.kv_cache_bytes = 4 * block_bytes(16);
  setup.kv.swap_space_bytes = 64 * block_bytes(16);
  setup.config.scheduler.preemption_mode = PreemptionMode::kSwap;
  auto cpu = make_engine(setup);
  Engine& engine = cpu->engine;
  std::map<RequestId, Tracked> tracked;
  add(engine, tracked, {10}, beam(3, 4));
  add(engine, tracked, {100, 101, 102, 103, 104, 105, 106, 107, 108, 109}, beam(2, 16, /*priority=*/-1));
  run_to_completion(engine, tracked, 1000);
  if (HasFatalFailure()) return;
  expect_same_as_alone(tracked);
}

// max_num_seqs caps the running sequences, but admission counts a parallel-sampling request as
// one: its n - 1 forks join the running set past the cap (here 6 sequences run with a cap of 4).
TEST_F(EngineSchedulingBugs, ParallelSamplingRespectsMaxNumSeqs) {
  Setup setup;
  setup.kv.block_size = 4;
  setup.kv.kv_cache_bytes = 64 * block_bytes(4);
  setup.config.scheduler.max_num_seqs = 4;
  auto cpu = make_engine(setup);
  Engine& engine = cpu->engine;
  RequestParams params = greedy(6);
  params.n = 3;
  ASSERT_TRUE(engine.add_request({10, 11, 12}, params));
  ASSERT_TRUE(engine.add_request({20, 21, 22}, params));
  for (int step = 0; step < 100 && engine.has_unfinished_requests(); ++step) {
    engine.step();
    ASSERT_LE(engine.metrics().num_running, 4) << "step " << step;
  }
}

// The tiny model itself: loads, and its tokenizer round-trips text.
TEST(TinyRandomModel, LoadsAndRoundTripsText) {
  auto tiny = testing::TinyModel::create();
  ASSERT_TRUE(tiny) << tiny.error();
  const Tokenizer& tokenizer = (*tiny)->tokenizer();
  EXPECT_EQ(tokenizer.vocab_size(), testing::kTinyVocabSize);
  EXPECT_EQ((*tiny)->model().config().num_layers, 2);
  EXPECT_EQ((*tiny)->model().config().num_kv_heads, 2);
  const std::string text = "the cat sat with the other ones, and it is in the house";
  const std::vector<int32_t> ids = tokenizer.encode(text, false, false);
  EXPECT_EQ(tokenizer.decode(ids), text);
  EXPECT_LT(ids.size(), text.size());  // merges applied
  EXPECT_TRUE(tokenizer.is_end_of_generation(testing::kTinyEndOfText));
}

}  // namespace
}  // namespace folio
