// The figures of `folio bench serve`, checked on records whose answers are worked out by hand.
#ifdef FOLIO_HAS_SERVER
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "cli/bench_serve_arrivals.h"
#include "cli/bench_serve_metrics.h"

namespace folio::cli {
namespace {

RequestRecord ok(double ttft_s, double e2e_s, int32_t prompt, int32_t output, std::vector<double> itls = {}) {
  RequestRecord r;
  r.success = true;
  r.ttft_s = ttft_s;
  r.e2e_s = e2e_s;
  r.prompt_tokens = prompt;
  r.output_tokens = output;
  r.requested_output_tokens = output;
  r.itls_s = std::move(itls);
  r.output_tokens_source = TokenCountSource::kServerUsage;
  r.prompt_tokens_from_server = true;
  return r;
}

RequestRecord failed(const char* why) {
  RequestRecord r;
  r.error = why;
  r.prompt_tokens = 1000;  // must not count
  r.output_tokens = 1000;
  return r;
}

TEST(ServeMetrics, PercentilesInterpolateLinearlyBetweenRanks) {
  const std::vector<double> v = {4.0, 1.0, 3.0, 2.0};  // sorted: 1 2 3 4
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4.0);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);   // rank 1.5
  EXPECT_DOUBLE_EQ(percentile(v, 90), 3.7);   // rank 2.7
  EXPECT_DOUBLE_EQ(percentile(v, 99), 3.97);  // rank 2.97
  EXPECT_DOUBLE_EQ(percentile({7.0}, 99), 7.0);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0.0);
  // 1..101: the p-th percentile is 1 + p.
  std::vector<double> hundred;
  for (int i = 101; i >= 1; --i) hundred.push_back(i);
  EXPECT_DOUBLE_EQ(percentile(hundred, 90), 91.0);
  EXPECT_DOUBLE_EQ(percentile(hundred, 99), 100.0);
}

TEST(ServeMetrics, TpotExcludesTheFirstToken) {
  // 0.2 s to the first token, 9 more tokens by 1.1 s: 0.9 s / 9.
  EXPECT_DOUBLE_EQ(ok(0.2, 1.1, 5, 10).tpot_s(), 0.1);
  EXPECT_DOUBLE_EQ(ok(0.2, 0.2, 5, 1).tpot_s(), 0.0);  // no token after the first
  EXPECT_DOUBLE_EQ(ok(0.0, 0.0, 5, 0).tpot_s(), 0.0);
}

TEST(ServeMetrics, CountsThroughputsAndLatencies) {
  const std::vector<RequestRecord> records = {
      ok(0.1, 0.5, 10, 5, {0.1, 0.1, 0.1, 0.1}),  // TPOT 0.4 / 4 = 0.1
      ok(0.3, 1.3, 20, 11, {0.05, 0.15}),         // TPOT 1.0 / 10 = 0.1; chunks of several tokens
      ok(0.2, 0.2, 30, 1),                        // one token: no TPOT
      failed("HTTP 500: boom"),
  };
  const ServeMetrics m = compute_serve_metrics(records, 2.0, {});
  EXPECT_EQ(m.num_requests, 4);
  EXPECT_EQ(m.num_succeeded, 3);
  EXPECT_EQ(m.num_failed, 1);
  EXPECT_EQ(m.total_prompt_tokens, 60);
  EXPECT_EQ(m.total_output_tokens, 17);
  EXPECT_EQ(m.num_prompt_counts_from_server, 3);
  EXPECT_EQ(m.num_output_counts_from_usage, 3);
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.5);
  EXPECT_DOUBLE_EQ(m.output_token_throughput, 8.5);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 38.5);
  EXPECT_FALSE(m.request_goodput.has_value());

  // TTFT 0.1, 0.3, 0.2 s.
  EXPECT_EQ(m.ttft.count, 3u);
  EXPECT_NEAR(m.ttft.mean_ms, 200.0, 1e-9);
  EXPECT_NEAR(m.ttft.median_ms, 200.0, 1e-9);
  EXPECT_NEAR(m.ttft.p90_ms, 280.0, 1e-9);  // rank 1.8 of 100, 200, 300
  EXPECT_NEAR(m.ttft.p99_ms, 298.0, 1e-9);
  EXPECT_NEAR(m.ttft.std_ms, 81.6496580927726, 1e-9);
  // TPOT of the two requests with more than one token, both 0.1 s.
  EXPECT_EQ(m.tpot.count, 2u);
  EXPECT_NEAR(m.tpot.mean_ms, 100.0, 1e-9);
  // ITL pooled over requests: 0.05, 0.1 x4, 0.15.
  EXPECT_EQ(m.itl.count, 6u);
  EXPECT_NEAR(m.itl.mean_ms, 100.0, 1e-9);
  EXPECT_NEAR(m.itl.median_ms, 100.0, 1e-9);
  EXPECT_NEAR(m.itl.p99_ms, 147.5, 1e-9);  // rank 4.95 between 100 and 150
  // E2E 0.5, 1.3, 0.2 s.
  EXPECT_NEAR(m.e2el.mean_ms, 2000.0 / 3.0, 1e-9);
  EXPECT_NEAR(m.e2el.median_ms, 500.0, 1e-9);
}

TEST(ServeMetrics, GoodputCountsRequestsMeetingEveryObjective) {
  const std::vector<RequestRecord> records = {
      ok(0.1, 0.5, 10, 5),   // TTFT 100 ms, TPOT 100 ms, E2E 500 ms
      ok(0.3, 1.3, 20, 11),  // TTFT 300 ms: misses ttft:250
      ok(0.2, 2.2, 30, 11),  // TPOT 200 ms: misses tpot:150
      ok(0.2, 0.2, 30, 1),   // one token: TPOT counts as 0 and passes
      failed("timeout"),     // a failure is never good
  };
  const ServiceLevelObjectives slo = parse_service_level_objectives({"ttft:250", "tpot:150"}).value();
  const ServeMetrics m = compute_serve_metrics(records, 4.0, slo);
  EXPECT_EQ(m.num_good, 2);
  ASSERT_TRUE(m.request_goodput.has_value());
  EXPECT_DOUBLE_EQ(*m.request_goodput, 0.5);

  const ServiceLevelObjectives e2e_only = parse_service_level_objectives({"e2el:1000"}).value();
  EXPECT_EQ(compute_serve_metrics(records, 4.0, e2e_only).num_good, 2);  // 500 and 200 ms
  // Equal to the objective meets it.
  EXPECT_TRUE(meets_objectives(ok(0.25, 0.25, 1, 1), slo));
}

TEST(ServeMetrics, ObjectivesParseOrExplain) {
  const ServiceLevelObjectives slo = parse_service_level_objectives({"ttft:500", "tpot:50.5", "e2el:3000"}).value();
  EXPECT_DOUBLE_EQ(*slo.ttft_ms, 500.0);
  EXPECT_DOUBLE_EQ(*slo.tpot_ms, 50.5);
  EXPECT_DOUBLE_EQ(*slo.e2el_ms, 3000.0);
  EXPECT_TRUE(parse_service_level_objectives({}).value().empty());
  for (const char* bad : {"ttft", "ttft:", "ttft:abc", "ttft:-5", "ttft:0", "itl:50", "ttft:5ms", "ttft:nan"}) {
    EXPECT_FALSE(parse_service_level_objectives({bad}).has_value()) << bad;
  }
  EXPECT_NE(parse_service_level_objectives({"ttft:1", "ttft:2"}).error().find("twice"), std::string::npos);
  EXPECT_NE(parse_service_level_objectives({"itl:5"}).error().find("ttft, tpot, e2el"), std::string::npos);
}

TEST(ServeMetrics, NothingSucceededGivesZerosNotNaNs) {
  const ServeMetrics m = compute_serve_metrics({failed("refused"), failed("refused")}, 0.01,
                                               parse_service_level_objectives({"ttft:1"}).value());
  EXPECT_EQ(m.num_failed, 2);
  EXPECT_EQ(m.total_output_tokens, 0);
  EXPECT_DOUBLE_EQ(m.request_throughput, 0.0);
  EXPECT_DOUBLE_EQ(m.ttft.mean_ms, 0.0);
  EXPECT_DOUBLE_EQ(*m.request_goodput, 0.0);
  EXPECT_DOUBLE_EQ(compute_serve_metrics({}, 0.0, {}).output_token_throughput, 0.0);
}

TEST(PoissonArrivals, SeededWithTheRequestedMeanGap) {
  const std::vector<double> a = poisson_arrival_times_s(20000, 4.0, 7);
  EXPECT_EQ(a, poisson_arrival_times_s(20000, 4.0, 7));
  EXPECT_NE(a, poisson_arrival_times_s(20000, 4.0, 8));
  EXPECT_DOUBLE_EQ(a.front(), 0.0);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  // 19,999 gaps of mean 0.25 s: the mean is within a few standard errors (0.25 / sqrt(n)).
  EXPECT_NEAR(a.back() / 19999.0, 0.25, 0.01);
  // Exponential gaps: about 1 - 1/e of them are shorter than the mean.
  int shorter = 0;
  for (size_t i = 1; i < a.size(); ++i) shorter += (a[i] - a[i - 1]) < 0.25 ? 1 : 0;
  EXPECT_NEAR(shorter / 19999.0, 0.632, 0.02);
}

TEST(PoissonArrivals, InfiniteRateSendsEverythingAtOnce) {
  EXPECT_EQ(poisson_arrival_times_s(5, std::numeric_limits<double>::infinity(), 1), std::vector<double>(5, 0.0));
  EXPECT_TRUE(poisson_arrival_times_s(0, 1.0, 1).empty());
}

}  // namespace
}  // namespace folio::cli
#endif  // FOLIO_HAS_SERVER
