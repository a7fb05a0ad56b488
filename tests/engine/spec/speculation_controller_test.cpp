// The controller against synthetic cost curves: where extra tokens are nearly free (a GPU's
// memory-bound decode) it proposes the most; where every token costs its share (saturation,
// or a CPU) it proposes none; and it follows acceptance.
#include "engine/spec/speculation_controller.h"

#include <gtest/gtest.h>

#include <functional>
#include <vector>

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
  EXPECT_DOUBLE_EQ(SpeculationController::expected_tokens(0.5, 0), 1.0);
  EXPECT_DOUBLE_EQ(SpeculationController::expected_tokens(0.5, 2), 1.75);
  EXPECT_DOUBLE_EQ(SpeculationController::expected_tokens(1.0, 4), 5.0);
  EXPECT_EQ(SpeculationController::useful_tokens(0.5, 8), 3);  // 0.5, 0.25, 0.125 >= 0.1
  EXPECT_EQ(SpeculationController::useful_tokens(0.05, 8), 0);
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
