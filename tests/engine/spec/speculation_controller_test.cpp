// The controller against synthetic cost curves: where extra tokens are nearly free (a GPU's
// memory-bound decode) it proposes the most; where every token costs its share (saturation,
// or a CPU) it proposes none; and it follows acceptance.
#include "engine/spec/speculation_controller.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <vector>

#include "engine/spec/speculation.h"

namespace folio {
namespace {

// Runs the controller for steps steps against cost(tokens) and returns its last k.
int32_t settle(SpeculationController& c, const std::vector<SpeculationCandidate>& candidates, int32_t base,
               const std::function<double(int32_t)>& cost, int steps = 200) {
  std::vector<int32_t> ks;
  for (int i = 0; i < steps; ++i) {
    c.choose(candidates, base, ks);
    int32_t extra = 0;
    for (int32_t k : ks) extra += k;
    c.observe(base + extra, cost(base + extra), {});
  }
  return c.last_k();
}

std::vector<SpeculationCandidate> requests(int n, double acceptance) {
  return std::vector<SpeculationCandidate>(static_cast<size_t>(n), SpeculationCandidate{acceptance, 8, 1, 100});
}

TEST(SpeculationControllerTest, ExpectedTokens) {
  const SpeculationCandidate half{0.5, 8, 1, 100};
  EXPECT_DOUBLE_EQ(SpeculationController::expected_tokens(half, 0), 1.0);
  EXPECT_DOUBLE_EQ(SpeculationController::expected_tokens(half, 2), 1.75);
  EXPECT_DOUBLE_EQ(SpeculationController::expected_tokens(SpeculationCandidate{1.0, 8, 1, 100}, 4), 5.0);
  EXPECT_EQ(SpeculationController::useful_tokens(half, 8), 3);  // 0.5, 0.25, 0.125 >= 0.1
  EXPECT_EQ(SpeculationController::useful_tokens(SpeculationCandidate{0.05, 8, 1, 100}, 8), 0);
  // Per-position rates: 0.3 for the first proposal, 0.9 for each once the run started (an
  // n-gram match): 1 + 0.3 + 0.27 + 0.243 = 1.813 with three, and the fourth (0.197) still used.
  const std::vector<double> run = {0.3, 0.9, 0.9};
  SpeculationCandidate ngram{0.9, 8, 1, 100, run};
  EXPECT_DOUBLE_EQ(SpeculationController::expected_tokens(ngram, 3), 1.0 + 0.3 + 0.27 + 0.243);
  EXPECT_EQ(SpeculationController::useful_tokens(ngram, 8), 8);                                 // 0.3 * 0.9^7 = 0.143
  EXPECT_EQ(SpeculationController::useful_tokens(SpeculationCandidate{0.3, 8, 1, 100}, 8), 1);  // one rate: 0.09
}

TEST(SpeculationControllerTest, RatesArePerPositionAndConditional) {
  Speculation s;
  // Runs of 0 or all 4 accepted, as n-gram matches go: the first position half the time, every
  // later one whenever it is tested.
  for (int i = 0; i < 60; ++i) s.record(4, i % 2 == 0 ? 0 : 4);
  ASSERT_EQ(s.rates.size(), 4u);
  EXPECT_NEAR(s.rates[0], 0.5, 0.05);
  for (size_t j = 1; j < 4; ++j) EXPECT_GT(s.rates[j], 0.95) << j;
  s.record(4, 1);  // position 1 rejected once: it moves, position 2 (not tested) does not
  EXPECT_LT(s.rates[1], 0.95);
  EXPECT_GT(s.rates[2], 0.95);
}

// A stretch of rejections takes a request's proposals away; steps without them bring its rates
// back toward the prior, so it is tried again (else one bad stretch would end it for good).
TEST(SpeculationControllerTest, RatesThatFellRecoverWithoutTests) {
  Speculation s;
  for (int i = 0; i < 20; ++i) s.record(4, 0);
  SpeculationCandidate low;
  low.max_tokens = 4;
  low.rates = s.rates;
  ASSERT_EQ(SpeculationController::useful_tokens(low, 4), 0) << "rate(0) " << s.rates[0];
  int steps = 0;
  for (; steps < 100; ++steps) {
    s.relax();
    SpeculationCandidate c = low;
    c.rates = s.rates;
    if (SpeculationController::useful_tokens(c, 4) > 0) break;
  }
  EXPECT_GE(steps, 2) << "relaxing too fast: the evidence of the rejections counts for nothing";
  EXPECT_LT(steps, 20) << "relaxing too slowly";
  for (int i = 0; i < 200; ++i) s.relax();
  EXPECT_NEAR(s.rates[0], Speculation::kPrior, 1e-6);
}

// The prior is the proposer's pooled rates: a request relaxes toward what proposals achieve
// across requests, and a new one starts there. Where verification is dear (3.5 decodes for 4
// proposals, as on a busy CPU) a middling constant prior would never pay for another test,
// while the proposer's own 0.9 does.
TEST(SpeculationControllerTest, RatesRelaxTowardThePooledPrior) {
  Speculation pooled;
  for (int i = 0; i < 300; ++i) pooled.record(4, i % 10 == 0 ? 2 : 4, Speculation::kPooledDecay);
  ASSERT_EQ(pooled.rates.size(), 4u);
  EXPECT_GT(pooled.rates[0], 0.95);
  EXPECT_NEAR(pooled.rates[2], 0.9, 0.05);
  Speculation s;
  for (int i = 0; i < 20; ++i) s.record(4, 0);
  for (int i = 0; i < 300; ++i) s.relax(pooled.rates);
  for (size_t j = 0; j < 4; ++j) EXPECT_NEAR(s.rates[j], pooled.rates[j], 1e-6) << j;
  Speculation fresh;
  fresh.start_from(pooled.rates);
  EXPECT_EQ(fresh.rates, pooled.rates);

  const auto dear = [](int32_t tokens) { return 0.04 + 0.025 * (tokens - 1); };  // t(5) = 3.5 t(1)
  SpeculationController with_pooled(4, true, 0.0), with_constant(4, true, 0.0);
  EXPECT_GT(settle(with_pooled, requests(1, pooled.rates[2]), 1, dear), 0);
  EXPECT_EQ(settle(with_constant, requests(1, Speculation::kPrior), 1, dear), 0);
}

// A shape's first step may pay for a warm-up (on the H200 the first 5-row verification of
// SmolLM2 took 5.5 ms against 0.9 ms for a decode, and after it 1.0 ms): one such measurement
// must not keep the controller away from proposals for kRecheckSteps.
TEST(SpeculationControllerTest, AWarmUpOutlierIsRetriedSoon) {
  SpeculationController c(4, true, 0.0);
  std::map<int32_t, int> seen;
  const auto flat_after_warm_up = [&](int32_t tokens) { return ++seen[tokens] == 1 && tokens > 1 ? 0.0055 : 0.001; };
  const std::vector<SpeculationCandidate> one = requests(1, 0.8);
  std::vector<int32_t> ks;
  int64_t proposed_steps = 0;
  for (int i = 0; i < 100; ++i) {
    c.choose(one, 1, ks);
    c.observe(1 + ks[0], flat_after_warm_up(1 + ks[0]), {});
    proposed_steps += ks[0] > 0;
  }
  EXPECT_EQ(c.last_k(), 4);
  EXPECT_GT(proposed_steps, 60) << "the outlier kept proposals away";
}

TEST(SpeculationControllerTest, FlatCostProposesTheMost) {
  SpeculationController c(4, true, 0.0);
  const auto flat = [](int32_t tokens) { return 0.005 + 1e-7 * tokens; };
  EXPECT_EQ(settle(c, requests(1, 0.8), 1, flat), 4);
}

TEST(SpeculationControllerTest, ComputeBoundCostProposesNothing) {
  SpeculationController c(4, true, 0.0);
  // 512 decodes: every token costs its full share.
  const auto linear = [](int32_t tokens) { return 1e-4 * tokens; };
  EXPECT_EQ(settle(c, requests(512, 0.7), 512, linear), 0);
}

TEST(SpeculationControllerTest, KneeCostStopsPastTheKnee) {
  // Flat up to 64 tokens, then linear: 8 requests at 0.8 gain from 4 proposals each (40
  // tokens, under the knee); 48 requests cannot afford them all.
  const auto knee = [](int32_t tokens) { return 0.01 * std::max(1.0, tokens / 64.0); };
  SpeculationController few(4, true, 0.0);
  EXPECT_EQ(settle(few, requests(8, 0.8), 8, knee), 4);
  SpeculationController many(4, true, 0.0);
  EXPECT_LT(settle(many, requests(48, 0.8), 48, knee), 4);
}

TEST(SpeculationControllerTest, DraftPassesCount) {
  // Free target tokens, but each draft pass costs as much as a target step: at acceptance 0.3
  // a proposal is not worth a pass.
  SpeculationController c(4, true, 1.0);
  std::vector<int32_t> ks;
  const auto candidates = requests(1, 0.3);
  for (int i = 0; i < 200; ++i) {
    c.choose(candidates, 1, ks);
    c.observe(1 + ks[0], 0.01, ProposerTiming{ks[0] > 0 ? 1 : 0, 0.01, ks[0] - 1, 1, 0.01 * (ks[0] - 1)});
  }
  EXPECT_EQ(c.last_k(), 0);
}

TEST(SpeculationControllerTest, ADraftThatHasNotSeenAPromptPaysForItFromWhatIsLeft) {
  // Free target tokens, cheap draft passes, but the draft's catch-up costs 1 ms per token: a
  // request 400 tokens behind with 8 tokens left is not worth it, with 4,000 left it is.
  auto decide = [](int32_t remaining) {
    SpeculationController c(4, true, 0.01);  // a draft of 1% of the target's work
    std::vector<SpeculationCandidate> candidates = {SpeculationCandidate{0.8, 4, 400, remaining}};
    std::vector<int32_t> ks;
    for (int i = 0; i < 50; ++i) {
      c.choose(candidates, 1, ks);
      ProposerTiming t;
      if (ks[0] > 0) t = ProposerTiming{400, 0.4, ks[0] - 1, 1, 0.0001 * (ks[0] - 1)};
      c.observe(1 + ks[0], 0.01, t);
      c.observe(1, 0.01, {});  // (the k = 0 point, as other steps measure it)
    }
    return c.last_k();
  };
  EXPECT_EQ(decide(8), 0);
  EXPECT_EQ(decide(4000), 4);
}

TEST(SpeculationControllerTest, NotAdaptiveProposesTheMostWhereverItCan) {
  SpeculationController fixed(3, false, 0.0);
  std::vector<int32_t> ks;
  std::vector<SpeculationCandidate> candidates = requests(3, 0.01);
  candidates[2].max_tokens = 1;
  fixed.choose(candidates, 3, ks);
  EXPECT_EQ(ks, (std::vector<int32_t>{3, 3, 1}));
}

}  // namespace
}  // namespace folio
