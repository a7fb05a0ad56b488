// The rejection sampler alone, on small vocabularies with known p and q: whatever q proposes,
// the kept-or-replaced token must be distributed as p. 200,000 draws per case against p by a
// chi-square test at significance 0.001 (fixed seeds, so the test is deterministic); and the
// same test must reject a wrong acceptance rule (min(1, q/p) instead of min(1, p/q)) and a
// residual drawn from p instead of max(p - q, 0), so the test can tell.
#include "engine/spec/rejection_sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

namespace folio {
namespace {

TokenDistribution dense(const std::vector<double>& probs) {
  TokenDistribution d;
  double total = 0.0;
  for (double p : probs) total += p;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] > 0.0) d.add(static_cast<int32_t>(i), static_cast<float>(probs[i] / total));
  }
  return d;
}

// Pearson's statistic of observed counts against expected probabilities.
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& probs, int64_t n) {
  double total = 0.0;
  for (double p : probs) total += p;
  double stat = 0.0;
  for (size_t i = 0; i < probs.size(); ++i) {
    const double expected = static_cast<double>(n) * probs[i] / total;
    if (expected == 0.0) {
      if (counts[i] != 0) return INFINITY;  // a token p forbids
      continue;
    }
    const double diff = static_cast<double>(counts[i]) - expected;
    stat += diff * diff / expected;
  }
  return stat;
}

// Chi-square critical values at significance 0.001 for df = 1..9.
double critical_001(int df) {
  static const double kValues[] = {10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88};
  return kValues[df - 1];
}

using Decide =
    std::function<AcceptDecision(int32_t, const TokenDistribution&, const TokenDistribution*, double, double)>;

// Draws x ~ q (or the fixed proposal with no q), decides, and tests the outcome against p.
double run_case(const std::vector<double>& p, const std::vector<double>* q, int32_t fixed_proposal,
                const Decide& decide, uint64_t seed, int64_t n = 200000) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const TokenDistribution target = dense(p);
  TokenDistribution draft;
  std::discrete_distribution<int32_t> from_q;
  if (q != nullptr) {
    draft = dense(*q);
    from_q = std::discrete_distribution<int32_t>(q->begin(), q->end());
  }
  std::vector<int64_t> counts(p.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t proposal = q != nullptr ? from_q(rng) : fixed_proposal;
    const double u1 = uniform(rng), u2 = uniform(rng);
    ++counts[static_cast<size_t>(decide(proposal, target, q != nullptr ? &draft : nullptr, u1, u2).token)];
  }
  return chi_square(counts, p, n);
}

int degrees(const std::vector<double>& p) {
  int support = 0;
  for (double x : p) support += x > 0.0;
  return support - 1;
}

// A wrong sampler: accepts with min(1, q/p).
AcceptDecision inverted_ratio(int32_t x, const TokenDistribution& p, const TokenDistribution* q, double u1, double u2) {
  double px = 0, qx = q == nullptr ? 1.0 : 0.0;
  for (size_t i = 0; i < p.tokens.size(); ++i) px += p.tokens[i] == x ? p.probs[i] : 0.0;
  if (q != nullptr) {
    for (size_t i = 0; i < q->tokens.size(); ++i) qx += q->tokens[i] == x ? q->probs[i] : 0.0;
  }
  if (u1 * px < qx) return {true, x};
  return {false, RejectionSampler::draw(p, u2)};
}

// Another: the right acceptance, but the replacement drawn from p itself.
AcceptDecision replacement_from_p(int32_t x, const TokenDistribution& p, const TokenDistribution* q, double u1,
                                  double u2) {
  RejectionSampler sampler;
  AcceptDecision d = sampler.decide(x, p, q, u1, u2);
  if (!d.accepted) d.token = RejectionSampler::draw(p, u2);
  return d;
}

struct Case {
  std::vector<double> p;
  std::vector<double> q;  // empty: a point-mass proposal (n-gram) on token 2
};

const std::vector<Case>& cases() {
  static const std::vector<Case> kCases = {
      {{0.5, 0.2, 0.1, 0.1, 0.05, 0.05}, {0.1, 0.1, 0.5, 0.1, 0.1, 0.1}},                        // q far from p
      {{0.3, 0.3, 0.2, 0.1, 0.1, 0.0, 0.0, 0.0}, {0.25, 0.25, 0.2, 0.1, 0.1, 0.05, 0.05, 0.0}},  // close, q wider
      {{0.0, 0.6, 0.4, 0.0}, {0.5, 0.0, 0.0, 0.5}},                                              // disjoint supports
      {{0.1, 0.2, 0.3, 0.4}, {}},                                                                // point mass
      {{0.7, 0.1, 0.1, 0.1}, {0.7, 0.1, 0.1, 0.1}},                                              // q == p
  };
  return kCases;
}

TEST(RejectionSamplerTest, OutputIsDistributedAsTheTarget) {
  RejectionSampler sampler;
  const Decide right = [&](int32_t x, const TokenDistribution& p, const TokenDistribution* q, double u1, double u2) {
    return sampler.decide(x, p, q, u1, u2);
  };
  uint64_t seed = 11;
  for (const Case& c : cases()) {
    const double stat = run_case(c.p, c.q.empty() ? nullptr : &c.q, 2, right, seed++);
    EXPECT_LT(stat, critical_001(degrees(c.p))) << "case with " << c.p.size() << " tokens";
  }
}

TEST(RejectionSamplerTest, TheTestRejectsWrongSamplers) {
  // Each wrong rule must fail on at least one case where q differs from p.
  const std::vector<Decide> wrong = {inverted_ratio, replacement_from_p};
  for (size_t w = 0; w < wrong.size(); ++w) {
    double worst = 0.0;
    for (size_t i = 0; i < 4; ++i) {
      const Case& c = cases()[i];
      worst = std::max(worst,
                       run_case(c.p, c.q.empty() ? nullptr : &c.q, 2, wrong[w], 100 + i) / critical_001(degrees(c.p)));
    }
    EXPECT_GT(worst, 1.0) << "wrong sampler " << w << " passed the chi-square test";
  }
}

TEST(RejectionSamplerTest, AcceptanceRateIsTheOverlapOfPAndQ) {
  // P(accept) = sum_x min(p(x), q(x)).
  const std::vector<double> p = {0.5, 0.2, 0.1, 0.1, 0.05, 0.05};
  const std::vector<double> q = {0.1, 0.1, 0.5, 0.1, 0.1, 0.1};
  double overlap = 0.0;
  for (size_t i = 0; i < p.size(); ++i) overlap += std::min(p[i], q[i]);
  RejectionSampler sampler;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::discrete_distribution<int32_t> from_q(q.begin(), q.end());
  const TokenDistribution tp = dense(p), tq = dense(q);
  int64_t accepted = 0;
  const int64_t n = 100000;
  for (int64_t i = 0; i < n; ++i) accepted += sampler.decide(from_q(rng), tp, &tq, uniform(rng), uniform(rng)).accepted;
  EXPECT_NEAR(static_cast<double>(accepted) / n, overlap, 0.01);
}

TEST(RejectionSamplerTest, PointMassProposalOutsideTheTargetIsAlwaysReplaced) {
  RejectionSampler sampler;
  const TokenDistribution p = dense({0.0, 0.5, 0.5});
  for (double u : {0.0, 0.5, 0.999}) {
    const AcceptDecision d = sampler.decide(0, p, nullptr, u, u);
    EXPECT_FALSE(d.accepted);
    EXPECT_NE(d.token, 0);
  }
  // A certain target accepts its token whatever the uniform.
  const TokenDistribution sure = dense({0.0, 1.0});
  EXPECT_TRUE(sampler.decide(1, sure, nullptr, 0.999999, 0.5).accepted);
}

}  // namespace
}  // namespace folio
