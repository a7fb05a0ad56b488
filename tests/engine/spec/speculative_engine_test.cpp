// Speculative decoding in the engine, on the CPU (whose rows do not depend on the batch, so
// speculation must not change a greedy token): with a good draft (the target's own weights
// re-quantized), a useless one (other random weights: acceptance near zero) and n-gram lookup,
// 64 mixed requests under continuous batching give the tokens, text and logprobs they give
// without speculation; so do stop strings and stop tokens inside an accepted run, max_tokens
// mid-run, n > 1, preemption by recompute and by swap, and prefix caching (hits not lost). A
// seeded sampled request gives the same tokens with speculation on or off; with rejection
// sampling its token distribution at one position matches decoding without speculation
// (chi-square over 4,000 seeds). Blocks of both models never leak.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_executor.h"
#include "engine/engine.h"
#include "engine/spec/draft_model_proposer.h"
#include "engine/spec/ngram_proposer.h"
#include "support/cpu_engine.h"
#include "support/default_model_fixture.h"
#include "support/tiny_model.h"

namespace folio {
namespace {

enum class Draft { kNgram, kGood, kUseless };

// The CPU executor reporting verify_rows_as_decodes (as the GPU does in batch-invariant mode),
// or graph_decode_seqs (as the GPU does with its decode graphs), counting the verification rows
// it was sent as their own sequences: consecutive one-token sequences over the same block table.
enum class Split { kNever, kAlways, kWithinGraphs };
constexpr int32_t kGraphSeqs = 8;

class RowsAsDecodesExecutor : public Executor {
 public:
  RowsAsDecodesExecutor(Executor& inner, Split split) : inner_(inner), split_(split) {}
  const ModelConfig& config() const override { return inner_.config(); }
  KvPoolLayout kv_pool() const override { return inner_.kv_pool(); }
  Capabilities capabilities() const override {
    Capabilities caps = inner_.capabilities();
    caps.verify_rows_as_decodes = split_ == Split::kAlways;
    caps.graph_decode_seqs = split_ == Split::kWithinGraphs ? kGraphSeqs : 0;
    if (max_logit_rows > 0) caps.max_logit_rows = max_logit_rows;
    return caps;
  }
  StepResult execute(const ForwardBatch& batch, const SamplingPlan* plan) override {
    if (max_logit_rows > 0) {
      EXPECT_LE(batch.logit_rows.size(), static_cast<size_t>(max_logit_rows));
    }
    int64_t split = 0;
    bool whole = false;  // a sequence of several tokens (a prefill chunk or an unsplit verification)
    for (size_t i = 0; i < batch.sequences.size(); ++i) {
      whole = whole || batch.sequences[i].query_len > 1;
      if (i == 0) continue;
      const AttentionSequence& a = batch.sequences[i - 1];
      const AttentionSequence& b = batch.sequences[i];
      EXPECT_FALSE(b.query_len > 1 && b.block_table.data() == a.block_table.data());
      if (a.query_len == 1 && b.query_len == 1 && a.block_table.data() == b.block_table.data()) {
        EXPECT_EQ(b.context_len, a.context_len + 1);
        EXPECT_EQ(b.query_start, a.query_start + 1);
        ++split;
      }
    }
    if (split_ == Split::kWithinGraphs && split > 0) {
      EXPECT_FALSE(whole) << "rows split in a step that runs eagerly anyway";
      EXPECT_LE(batch.sequences.size(), static_cast<size_t>(kGraphSeqs)) << "more rows than a graph takes";
    }
    split_rows += split;
    whole_steps += whole;
    return inner_.execute(batch, plan);
  }
  int64_t split_rows = 0;
  int64_t whole_steps = 0;     // steps with a multi-token sequence
  int32_t max_logit_rows = 0;  // > 0: reported as the executor's limit, and checked

 private:
  Executor& inner_;
  Split split_;
};

const char* draft_name(Draft d) {
  return d == Draft::kNgram ? "ngram" : d == Draft::kGood ? "good draft" : "useless draft";
}

// Two equal-size samples' token counts (first, second) as a chi-square homogeneity statistic;
// tokens seen fewer than 10 times in both pooled into one category.
struct ChiSquare {
  double stat = 0.0;
  int categories = 0;
};
ChiSquare two_sample_chi_square(const std::map<int32_t, std::pair<int64_t, int64_t>>& counts) {
  ChiSquare r;
  std::pair<int64_t, int64_t> rare{0, 0};
  auto add = [&](std::pair<int64_t, int64_t> c) {
    const double e = static_cast<double>(c.first + c.second) / 2.0;
    r.stat += (c.first - e) * (c.first - e) / e + (c.second - e) * (c.second - e) / e;
    ++r.categories;
  };
  for (const auto& [token, c] : counts) {
    if (c.first + c.second >= 10) {
      add(c);
    } else {
      rare.first += c.first;
      rare.second += c.second;
    }
  }
  if (rare.first + rare.second > 0) add(rare);
  return r;
}

struct RunResult {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::string> text;
  std::vector<std::vector<float>> logprobs;
  std::vector<FinishReason> reasons;
  EngineMetrics metrics;
  int32_t proposer_blocks = 0;
  int64_t split_rows = 0;   // verification rows sent as their own sequences
  int64_t whole_steps = 0;  // steps with a multi-token sequence
};

class SpeculativeEngineTest : public testing::SmallModelTest {
 protected:
  static void SetUpTestSuite() {
    SmallModelTest::SetUpTestSuite();
    // The target's shape and seed in Q8_0 (the target is Q4_1): nearly the same logits.
    testing::TinyModelOptions options;
    options.block_count = 4;
    options.embedding_length = 128;
    options.feed_forward_length = 256;
    options.context_length = 4096;
    options.rope_dimension_count = 32;
    options.output_gain = 4.0f;
    options.weight_type = DType::Q8_0;
    good_ = testing::TinyModel::create(options).value().release();
    options.seed = 0xBAD;
    options.block_count = 2;
    useless_ = testing::TinyModel::create(options).value().release();
  }
  static void TearDownTestSuite() {
    delete good_;
    delete useless_;
    good_ = useless_ = nullptr;
    SmallModelTest::TearDownTestSuite();
  }

  // A proposer of the kind, with its draft executor (a pool of draft_blocks blocks of 16).
  struct Speculator {
    std::unique_ptr<cpu::CpuExecutor> executor;
    std::unique_ptr<Proposer> proposer;
  };
  static Speculator speculator(Draft kind, int32_t draft_blocks = 2048) {
    Speculator s;
    if (kind == Draft::kNgram) {
      s.proposer = std::make_unique<NgramProposer>(NgramConfig{});
      return s;
    }
    ModelWeights& weights = kind == Draft::kGood ? good_->model() : useless_->model();
    s.executor = std::make_unique<cpu::CpuExecutor>(weights, *backend_, draft_blocks, 16, 0);
    s.proposer = std::make_unique<DraftModelProposer>(*s.executor);
    return s;
  }

  static EngineConfig speculative(EngineConfig config, int32_t k, bool adaptive = false) {
    config.speculative.num_tokens = k;
    config.speculative.adaptive = adaptive;
    return config;
  }

  // Runs the requests (three arrivals per step) to the end, checking invariants every step.
  static RunResult run(const std::vector<std::vector<int32_t>>& prompts, const std::vector<RequestParams>& params,
                       const EngineConfig& config, Proposer* proposer, const KvCacheOptions& kv = {},
                       Split split = Split::kNever, int32_t max_logit_rows = 0) {
    testing::CpuEngine cpu(*model_, *backend_, *tokenizer_, EngineConfig{}, kv);
    RowsAsDecodesExecutor wrapped(cpu.executor, split);
    wrapped.max_logit_rows = max_logit_rows;
    Engine engine(wrapped, *tokenizer_, config, proposer);
    RunResult r;
    r.tokens.resize(prompts.size());
    r.text.resize(prompts.size());
    r.logprobs.resize(prompts.size());
    r.reasons.resize(prompts.size());
    std::map<RequestId, size_t> index;
    size_t next = 0;
    while (next < prompts.size() || engine.has_unfinished_requests()) {
      for (int a = 0; a < 3 && next < prompts.size(); ++a, ++next) {
        index[engine.add_request(prompts[next], params[next]).value()] = next;
      }
      for (const RequestOutput& out : engine.step()) {
        if (out.index != 0) continue;  // n > 1: the first sample stands for the request
        const size_t i = index.at(out.id);
        r.tokens[i].insert(r.tokens[i].end(), out.new_tokens.begin(), out.new_tokens.end());
        r.text[i] += out.text_delta;
        for (const SampleResult& s : out.new_samples) r.logprobs[i].push_back(s.logprob);
        if (out.finished) r.reasons[i] = out.finish_reason;
      }
      const Status status = engine.check_invariants();
      EXPECT_TRUE(status) << status.message();
      if (!status) break;
    }
    engine.step();  // forgets the last finished requests
    r.split_rows = wrapped.split_rows;
    r.whole_steps = wrapped.whole_steps;
    r.metrics = engine.metrics();
    r.proposer_blocks = proposer != nullptr ? proposer->num_used_blocks() : 0;
    EXPECT_EQ(r.metrics.kv.num_used_blocks, 0);
    EXPECT_EQ(r.proposer_blocks, 0);
    return r;
  }

  std::vector<std::vector<int32_t>> mixed_prompts(int n) const {
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < n; ++i) prompts.push_back(slice(61 * i, 2 + (i * 37) % 120));
    return prompts;
  }

  static void expect_same(const RunResult& a, const RunResult& b, const std::string& what) {
    for (size_t i = 0; i < a.tokens.size(); ++i) {
      EXPECT_EQ(a.tokens[i], b.tokens[i]) << what << ": request " << i;
      EXPECT_EQ(a.text[i], b.text[i]) << what << ": request " << i;
      EXPECT_EQ(a.reasons[i], b.reasons[i]) << what << ": request " << i;
      ASSERT_EQ(a.logprobs[i].size(), b.logprobs[i].size()) << what << ": request " << i;
      for (size_t j = 0; j < a.logprobs[i].size(); ++j) {
        if (std::isnan(a.logprobs[i][j])) {
          EXPECT_TRUE(std::isnan(b.logprobs[i][j]));
        } else {
          EXPECT_EQ(a.logprobs[i][j], b.logprobs[i][j]) << what << ": request " << i << " token " << j;
        }
      }
    }
  }

  static inline testing::TinyModel* good_ = nullptr;
  static inline testing::TinyModel* useless_ = nullptr;
};

TEST_F(SpeculativeEngineTest, GreedyEqualsWithoutSpeculationForEveryProposer) {
  const auto prompts = mixed_prompts(64);
  std::vector<RequestParams> params;
  for (size_t i = 0; i < prompts.size(); ++i) {
    RequestParams p = greedy(8 + static_cast<int32_t>(i % 5) * 6);
    if (i % 4 == 1) p.sampling.logprobs = 2;
    params.push_back(p);
  }
  EngineConfig config;
  config.scheduler.max_num_batched_tokens = 128;  // prompts in chunks beside decodes and proposals
  const RunResult plain = run(prompts, params, config, nullptr);
  for (Draft kind : {Draft::kNgram, Draft::kGood, Draft::kUseless}) {
    Speculator s = speculator(kind);
    const RunResult spec = run(prompts, params, speculative(config, 4), s.proposer.get());
    expect_same(plain, spec, draft_name(kind));
    const SpeculationMetrics& m = spec.metrics.speculation;
    // Enough proposals to matter (n-gram's count follows the generated text: 199-230 so far).
    EXPECT_GT(m.num_draft_tokens, 150) << draft_name(kind);
    if (kind == Draft::kGood) {
      EXPECT_GT(m.acceptance_rate(), 0.4);  // random weights in Q8_0 against Q4_1: close, not equal
      EXPECT_LT(spec.metrics.num_steps, plain.metrics.num_steps);
    }
    if (kind == Draft::kUseless) {
      EXPECT_LT(m.acceptance_rate(), 0.3);
    } else {
      EXPECT_GT(m.mean_acceptance_length(), 1.3) << draft_name(kind);
    }
    std::printf(
        "[ %s ] %lld drafts, %lld draft tokens, %lld accepted (%.2f), mean length %.2f, %lld steps (%lld without)\n",
        draft_name(kind), static_cast<long long>(m.num_drafts), static_cast<long long>(m.num_draft_tokens),
        static_cast<long long>(m.num_accepted_tokens), m.acceptance_rate(), m.mean_acceptance_length(),
        static_cast<long long>(spec.metrics.num_steps), static_cast<long long>(plain.metrics.num_steps));
  }
}

// A device that verifies each row as a decode (the GPU with --batch-invariant) gets the same
// tokens, with the fp16 cache and with KIVI's staged blocks (each row's own staging slice).
TEST_F(SpeculativeEngineTest, VerificationRowsAsDecodesGiveTheSameTokens) {
  const auto prompts = mixed_prompts(24);
  std::vector<RequestParams> params;
  for (size_t i = 0; i < prompts.size(); ++i) params.push_back(greedy(10 + static_cast<int32_t>(i % 3) * 7));
  EngineConfig config;
  config.scheduler.max_num_batched_tokens = 128;
  for (KvFormat format : {KvFormat::kFp16, KvFormat::kKivi4}) {
    KvCacheOptions kv;
    kv.format = format;
    kv.block_size = 32;  // KIVI's blocks hold whole 32-token key groups
    const RunResult plain = run(prompts, params, config, nullptr, kv);
    Speculator s = speculator(Draft::kGood);
    const RunResult spec = run(prompts, params, speculative(config, 4), s.proposer.get(), kv, Split::kAlways);
    const std::string what = "rows as decodes, " + std::string(kv_format_name(format));
    expect_same(plain, spec, what);
    EXPECT_GT(spec.split_rows, 100) << what;
    EXPECT_GT(spec.metrics.speculation.num_accepted_tokens, 50) << what;
  }
}

// Where the executor replays graphs of up to kGraphSeqs decodes, a step of decodes and
// verification chunks whose rows fit is split (one graph launch), any other step kept whole;
// the tokens are the same either way.
TEST_F(SpeculativeEngineTest, VerificationRowsSplitOnlyWhereAGraphTakesThem) {
  const auto prompts = mixed_prompts(12);
  std::vector<RequestParams> params;
  for (size_t i = 0; i < prompts.size(); ++i) params.push_back(greedy(12 + static_cast<int32_t>(i % 4) * 9));
  EngineConfig config;
  config.scheduler.max_num_batched_tokens = 64;
  const RunResult plain = run(prompts, params, config, nullptr);
  Speculator s = speculator(Draft::kGood);
  const RunResult spec = run(prompts, params, speculative(config, 3), s.proposer.get(), {}, Split::kWithinGraphs);
  expect_same(plain, spec, "rows split within graphs");
  EXPECT_GT(spec.split_rows, 8) << "the tail of the run (few requests left) fits a graph";
  EXPECT_GT(spec.whole_steps, 5) << "prefill steps and wide verification steps stay whole";
}

// An executor returns at most max_logit_rows rows a step: proposals leave room for the rows of
// requests the same step admits (a prefill that completes samples too), or a server under load
// would ask the GPU for more rows than it holds.
TEST_F(SpeculativeEngineTest, ProposalsLeaveRowsForRequestsAdmittedInTheSameStep) {
  const auto prompts = mixed_prompts(24);
  std::vector<RequestParams> params(prompts.size(), greedy(16));
  EngineConfig config;
  config.scheduler.max_num_seqs = 8;
  config.scheduler.max_num_batched_tokens = 256;
  const RunResult plain = run(prompts, params, config, nullptr);
  Speculator s = speculator(Draft::kGood);
  const RunResult spec = run(prompts, params, speculative(config, 4), s.proposer.get(), {}, Split::kNever, 12);
  expect_same(plain, spec, "12 logit rows a step");
  EXPECT_GT(spec.metrics.speculation.num_accepted_tokens, 50);
}

TEST_F(SpeculativeEngineTest, StopConditionsInsideAnAcceptedRun) {
  // Stop tokens and stop strings taken from the plain run's own output, so that they hit in
  // the middle of what speculation accepts; max_tokens small enough to end mid-run.
  const auto prompts = mixed_prompts(16);
  std::vector<RequestParams> base(prompts.size(), greedy(24));
  EngineConfig config;
  const RunResult plain = run(prompts, base, config, nullptr);
  std::vector<RequestParams> params = base;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<int32_t>& out = plain.tokens[i];
    if (i % 3 == 0 && out.size() > 6) params[i].stop_token_ids = {out[5]};
    if (i % 3 == 1 && plain.text[i].size() > 12) params[i].stop = {plain.text[i].substr(8, 3)};
    if (i % 3 == 2) params[i].max_tokens = 1 + static_cast<int32_t>(i % 5);
  }
  const RunResult expected = run(prompts, params, config, nullptr);
  for (Draft kind : {Draft::kNgram, Draft::kGood}) {
    Speculator s = speculator(kind);
    expect_same(expected, run(prompts, params, speculative(config, 5), s.proposer.get()), draft_name(kind));
  }
}

TEST_F(SpeculativeEngineTest, PreemptionAndPrefixCachingKeepTokens) {
  const auto prompts = mixed_prompts(24);
  std::vector<RequestParams> params(prompts.size(), greedy(40));
  // 24 requests of up to ~160 tokens in 40 blocks of 16: preemption all the time.
  KvCacheOptions small;
  small.kv_cache_bytes = 40 * testing::block_bytes(*model_);
  KvCacheOptions small_swap = small;
  small_swap.swap_space_bytes = 400 * testing::block_bytes(*model_);
  EngineConfig recompute;
  EngineConfig swap;
  swap.scheduler.preemption_mode = PreemptionMode::kSwap;
  const RunResult plain = run(prompts, params, EngineConfig{}, nullptr);
  for (Draft kind : {Draft::kNgram, Draft::kGood}) {
    for (bool use_swap : {false, true}) {
      Speculator s = speculator(kind, 64);  // the draft's pool is tight too
      const RunResult spec = run(prompts, params, speculative(use_swap ? swap : recompute, 4), s.proposer.get(),
                                 use_swap ? small_swap : small);
      expect_same(plain, spec, std::string(draft_name(kind)) + (use_swap ? ", swap" : ", recompute"));
      EXPECT_GT(spec.metrics.num_preemptions, 0);
      EXPECT_GT(spec.metrics.speculation.num_accepted_tokens, 0);
    }
  }
  // Prefix caching: the same prompts twice over; the second round hits as often as without
  // speculation (rejected proposals never registered a block, accepted ones did).
  std::vector<std::vector<int32_t>> twice = prompts;
  twice.insert(twice.end(), prompts.begin(), prompts.end());
  std::vector<RequestParams> twice_params(twice.size(), greedy(40));
  const RunResult plain_twice = run(twice, twice_params, EngineConfig{}, nullptr);
  Speculator s = speculator(Draft::kGood);
  const RunResult spec_twice = run(twice, twice_params, speculative(EngineConfig{}, 4), s.proposer.get());
  expect_same(plain_twice, spec_twice, "prefix caching");
  EXPECT_GT(plain_twice.metrics.kv.prefix_cache.num_hit_blocks, 0);
  EXPECT_GE(spec_twice.metrics.kv.prefix_cache.num_hit_blocks, plain_twice.metrics.kv.prefix_cache.num_hit_blocks);
}

TEST_F(SpeculativeEngineTest, ParallelSamplesAndSeededSamplingGiveTheSameTokens) {
  const auto prompts = mixed_prompts(12);
  std::vector<RequestParams> params;
  for (size_t i = 0; i < prompts.size(); ++i) {
    RequestParams p = greedy(20);
    p.sampling.temperature = i % 2 ? 0.8f : 0.0f;
    p.sampling.seed = 1000 + i;
    p.sampling.top_k = i % 4 == 1 ? 20 : -1;
    p.sampling.repetition_penalty = i % 3 == 0 ? 1.3f : 1.0f;
    p.n = i % 3 == 2 ? 3 : 1;
    params.push_back(p);
  }
  const RunResult plain = run(prompts, params, EngineConfig{}, nullptr);
  for (Draft kind : {Draft::kNgram, Draft::kGood}) {
    Speculator s = speculator(kind);
    const RunResult spec = run(prompts, params, speculative(EngineConfig{}, 4), s.proposer.get());
    expect_same(plain, spec, draft_name(kind));
    EXPECT_GT(spec.metrics.speculation.num_accepted_tokens, 0);
  }
}

// Wilson-Hilferty: the chi-square quantile for df degrees of freedom at significance 0.001.
double chi_square_critical_001(int df) {
  const double z = 3.0902;
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

TEST_F(SpeculativeEngineTest, RejectionSamplingKeepsTheDistributionEndToEnd) {
  // 4,000 seeds of one sampled request; the token at output position 3 with speculation
  // (rejection sampling against the good draft, and against n-gram point masses) and without,
  // compared by a two-sample chi-square test over the tokens seen at least 10 times.
  // A prompt that repeats itself, so that n-gram lookup proposes too.
  std::vector<int32_t> prompt = slice(300, 6);
  for (int i = 0; i < 2; ++i) prompt.insert(prompt.end(), prompt.begin(), prompt.begin() + 6);
  const int n = 4000;
  std::vector<std::vector<int32_t>> prompts(n, prompt);
  std::vector<RequestParams> params(n);
  for (int i = 0; i < n; ++i) {
    params[i].max_tokens = 4;
    params[i].ignore_eos = true;
    params[i].sampling.temperature = 1.0f;
    params[i].sampling.seed = static_cast<uint64_t>(i) * 7919 + 1;
  }
  EngineConfig config;
  config.scheduler.max_num_seqs = 256;
  config.scheduler.max_num_batched_tokens = 2048;
  const RunResult plain = run(prompts, params, config, nullptr);
  for (Draft kind : {Draft::kGood, Draft::kNgram}) {
    Speculator s = speculator(kind);
    EngineConfig spec_config = speculative(config, 3);
    spec_config.speculative.seeded = SeededVerification::kRejectionSampling;
    const RunResult spec = run(prompts, params, spec_config, s.proposer.get());
    ASSERT_GT(spec.metrics.speculation.num_accepted_tokens, n / 8) << draft_name(kind);
    std::map<int32_t, std::pair<int64_t, int64_t>> counts;
    for (int i = 0; i < n; ++i) {
      ++counts[plain.tokens[i][3]].first;
      ++counts[spec.tokens[i][3]].second;
    }
    const ChiSquare same = two_sample_chi_square(counts);
    ASSERT_GE(same.categories, 3) << "the distribution is too peaked to test";
    EXPECT_LT(same.stat, chi_square_critical_001(same.categories - 1))
        << draft_name(kind) << ": " << same.categories << " categories";
    // And the test can tell: the plain run against itself shifted by one position differs.
    std::map<int32_t, std::pair<int64_t, int64_t>> shifted;
    for (int i = 0; i < n; ++i) {
      ++shifted[plain.tokens[i][3]].first;
      ++shifted[plain.tokens[i][1]].second;
    }
    const ChiSquare other = two_sample_chi_square(shifted);
    EXPECT_GT(other.stat, chi_square_critical_001(other.categories - 1))
        << "positions 1 and 3 look alike: the test is blind";
  }
}

}  // namespace
}  // namespace folio
