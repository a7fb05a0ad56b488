#include "server/latency_histogram.h"

#include <gtest/gtest.h>

namespace folio::server {
namespace {

TEST(LatencyHistogramTest, BucketsAreLessOrEqualAndCumulative) {
  const double bounds[] = {0.1, 1.0, 10.0};
  Histogram h(bounds);
  for (double v : {0.05, 0.1, 0.5, 1.0, 3.0, 100.0}) h.observe(v);
  EXPECT_EQ(h.counts(), (std::vector<int64_t>{2, 2, 1, 1}));
  EXPECT_EQ(h.count(), 6);
  EXPECT_DOUBLE_EQ(h.sum(), 104.65);
  const std::string text = h.prometheus_text("x_seconds", "help", "m=\"a\"");
  EXPECT_NE(text.find("# TYPE x_seconds histogram\n"), std::string::npos);
  EXPECT_NE(text.find("x_seconds_bucket{m=\"a\",le=\"0.1\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("x_seconds_bucket{m=\"a\",le=\"1\"} 4\n"), std::string::npos);
  EXPECT_NE(text.find("x_seconds_bucket{m=\"a\",le=\"10\"} 5\n"), std::string::npos);
  EXPECT_NE(text.find("x_seconds_bucket{m=\"a\",le=\"+Inf\"} 6\n"), std::string::npos);
  EXPECT_NE(text.find("x_seconds_count{m=\"a\"} 6\n"), std::string::npos);
}

TEST(LatencyHistogramTest, FinishedSequencesFeedEveryHistogram) {
  RequestLatencies l;
  RequestOutput out;
  out.finished = true;
  out.num_prompt_tokens = 12;
  out.num_output_tokens = 1;  // one token: no time per output token
  out.time_to_first_token_s = 0.2;
  l.observe_finished(out, 0.3);
  out.num_output_tokens = 5;
  out.time_per_output_token_s = 0.02;
  l.observe_finished(out, 0.4);
  EXPECT_EQ(l.time_to_first_token.count(), 2);
  EXPECT_EQ(l.time_per_output_token.count(), 1);
  EXPECT_DOUBLE_EQ(l.time_per_output_token.sum(), 0.02);
  EXPECT_DOUBLE_EQ(l.e2e_latency.sum(), 0.7);
  EXPECT_EQ(l.generation_tokens.count(), 2);
  EXPECT_DOUBLE_EQ(l.prompt_tokens.sum(), 24.0);
}

}  // namespace
}  // namespace folio::server
