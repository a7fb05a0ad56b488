// The fixture of the engine's randomized and scheduling-bug tests: a tiny random-weight Llama
// model (and its 32-wide-head and Gemma-3-shaped variants), a one-thread CPU backend, the
// randomized test's configurations, and the checks every output must pass (absorb).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "engine/spec/draft_model_proposer.h"
#include "engine/spec/ngram_proposer.h"
#include "support/cpu_engine.h"
#include "support/tiny_model.h"

namespace folio::testing {

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
  // The Gemma-3-shaped tiny model: two local layers of an 8-token window, then a global one.
  bool gemma = false;
  // Tensor-parallel ranks (issue 19): one scheduler and KV manager over N in-process ranks, each
  // holding its heads of every block; the replays run with the same N.
  int32_t tensor_parallel = 1;
};

inline void PrintTo(const RandomizedEngineConfig& c, std::ostream* os) {
  *os << c.name << " seed " << c.seed;
}

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
    auto tiny = TinyModel::create();
    ASSERT_TRUE(tiny) << tiny.error();
    tiny_ = std::move(tiny).value().release();
    // KIVI groups 32 channels: the same model shape with 32-wide heads (2 query heads over 1 KV head).
    auto wide = TinyModel::create({.head_count = 2, .head_count_kv = 1, .rope_dimension_count = 32});
    ASSERT_TRUE(wide) << wide.error();
    wide_ = std::move(wide).value().release();
    // 32-wide heads too, so that KIVI runs on it.
    auto gemma = TinyModel::create({.block_count = 3,
                                    .head_count = 2,
                                    .head_count_kv = 1,
                                    .rope_dimension_count = 32,
                                    .sliding_window = 8,
                                    .sliding_window_pattern = 3});
    ASSERT_TRUE(gemma) << gemma.error();
    gemma_ = std::move(gemma).value().release();
    backend_ = new cpu::CpuBackend(1);
  }
  static void TearDownTestSuite() {
    delete backend_;
    delete tiny_;
    delete wide_;
    delete gemma_;
    wide_ = nullptr;
    gemma_ = nullptr;
    backend_ = nullptr;
    tiny_ = nullptr;
  }

  // Every layer's K/V of one block: budgets are counted in those, so that a Gemma config's pool
  // holds as many tokens of whole context as the others' (and its window groups release more).
  static int64_t block_bytes(int32_t block_size, KvFormat format = KvFormat::kFp16, bool gemma = false) {
    return kv_bytes_per_block(model_for(format, gemma).config(), block_size, format, /*release_window_blocks=*/false);
  }

  // The engine's knobs, the CPU executor's pool, and the model.
  struct Setup {
    EngineConfig config;
    KvCacheOptions kv;
    bool gemma = false;
    int32_t tensor_parallel = 1;
  };

  static Setup engine_config(const RandomizedEngineConfig& c) {
    Setup setup;
    setup.kv.block_size = c.block_size;
    setup.kv.format = c.kv_format;
    setup.gemma = c.gemma;
    setup.tensor_parallel = c.tensor_parallel;
    setup.kv.kv_cache_bytes = c.num_blocks * block_bytes(c.block_size, c.kv_format, c.gemma);
    setup.kv.swap_space_bytes = c.num_host_blocks * block_bytes(c.block_size, c.kv_format, c.gemma);
    setup.config.enable_prefix_caching = c.enable_prefix_caching;
    setup.config.scheduler.preemption_mode = c.preemption_mode;
    setup.config.scheduler.max_num_batched_tokens = c.max_num_batched_tokens;
    setup.config.scheduler.max_num_seqs = c.max_num_seqs;
    add_staging(setup);
    return setup;
  }

  static ModelWeights& model_for(KvFormat format, bool gemma = false) {
    if (gemma) return gemma_->model();
    return kv_format_has_residual(format) ? wide_->model() : tiny_->model();
  }
  static ModelWeights& model_for(const Setup& setup) { return model_for(setup.kv.format, setup.gemma); }

  // Residual formats' staging blocks come out of the pool's budget: add them on top. Idle ones
  // hold sealed blocks (the overlay, kv/block_pool.h), and a staging block holds up to 5.33
  // kivi2 blocks: sized for every sequence they would multiply these tiny pools and nothing would
  // run out. Half as many keep the pool tight, and make staging itself run out too.
  static void add_staging(Setup& setup) {
    if (!kv_format_has_residual(setup.kv.format)) return;
    // Every block-table group's partial blocks want staging.
    setup.kv.num_staging_blocks =
        kv_staging_blocks_for(std::max(1, setup.config.scheduler.max_num_seqs / 2),
                              setup.config.scheduler.max_num_batched_tokens, setup.kv.block_size) *
        kv_groups_of(model_for(setup).config()).num_groups();
    const int64_t staging_bytes =
        static_cast<int64_t>(setup.kv.num_staging_blocks) *
        static_cast<int64_t>(kv_cache_shape(model_for(setup).config(), 1, setup.kv.block_size, setup.kv.format)
                                 .bytes_per_staging_block());
    setup.kv.kv_cache_bytes += staging_bytes;
    if (setup.kv.swap_space_bytes > 0) setup.kv.swap_space_bytes += staging_bytes;
  }

  static std::unique_ptr<CpuEngine> make_engine(const Setup& setup) {
    return std::make_unique<CpuEngine>(model_for(setup), *backend_, tiny_->tokenizer(), setup.config, setup.kv, nullptr,
                                       setup.tensor_parallel);
  }

  // An engine with a proposer (which must outlive it: declared first).
  struct SpeculativeEngine {
    std::unique_ptr<cpu::CpuExecutor> draft;
    std::unique_ptr<Proposer> proposer;
    std::unique_ptr<CpuEngine> cpu;
  };
  static SpeculativeEngine make_engine(const Setup& setup, const RandomizedEngineConfig& c) {
    SpeculativeEngine e;
    Setup s = setup;
    if (c.speculation == Speculation::kNgram) {
      e.proposer = std::make_unique<NgramProposer>(NgramConfig{});
    } else if (c.speculation == Speculation::kDraft) {
      e.draft = std::make_unique<cpu::CpuExecutor>(model_for(setup), *backend_, c.num_blocks + 1, 16, 0,
                                                   KvFormat::kFp16, 0, /*release_window_blocks=*/false);
      e.proposer = std::make_unique<DraftModelProposer>(*e.draft);
    }
    if (e.proposer != nullptr) {
      s.config.speculative.num_tokens = 4;
      s.config.speculative.adaptive = false;
    }
    e.cpu = std::make_unique<CpuEngine>(model_for(setup), *backend_, tiny_->tokenizer(), s.config, s.kv,
                                        e.proposer.get(), s.tensor_parallel);
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
  static Tracked run_alone(const Tracked& original, int32_t block_size, KvFormat format = KvFormat::kFp16,
                           bool gemma = false, int32_t tensor_parallel = 1) {
    Setup setup;
    setup.tensor_parallel = tensor_parallel;
    setup.kv.block_size = block_size;
    setup.kv.format = format;
    setup.gemma = gemma;
    setup.kv.kv_cache_bytes = (8192 / block_size) * block_bytes(block_size, format, gemma);
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

  static inline TinyModel* tiny_ = nullptr;
  static inline TinyModel* wide_ = nullptr;
  static inline TinyModel* gemma_ = nullptr;
  static inline cpu::CpuBackend* backend_ = nullptr;
};

}  // namespace folio::testing
