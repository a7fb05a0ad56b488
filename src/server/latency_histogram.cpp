#include "server/latency_histogram.h"

#include <algorithm>
#include <charconv>

namespace folio::server {
namespace {

// Seconds, from a millisecond (a fast GPU decode step) to most of an hour (a long CPU queue).
constexpr double kTtftBuckets[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
                                   1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
constexpr double kTpotBuckets[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3, 0.4,
                                   0.5,   0.75,  1.0,  2.5,   5.0,  7.5,   10.0, 20.0, 40.0, 80.0};
constexpr double kE2eBuckets[] = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                                  30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
// Token counts: 1-2-5 steps up to a million.
constexpr double kTokenBuckets[] = {1,    2,    5,     10,    20,    50,     100,    200,    500,    1000,
                                    2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000, 1000000};

// The shortest text that reads back as the same double: "0.005", not "0.0050000000000000001".
std::string number(double value) {
  char text[64];
  const std::to_chars_result end = std::to_chars(text, text + sizeof(text), value);
  return std::string(text, end.ptr);
}

}  // namespace

Histogram::Histogram(std::span<const double> upper_bounds)
    : bounds_(upper_bounds.begin(), upper_bounds.end()), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  // Prometheus buckets are "less than or equal".
  const size_t bucket = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  ++counts_[bucket];
  ++count_;
  sum_ += value;
}

std::string Histogram::prometheus_text(const std::string& name, const std::string& help,
                                       const std::string& labels) const {
  std::string text = "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  int64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? number(bounds_[i]) : "+Inf";
    text += name + "_bucket{" + labels + ",le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  text += name + "_sum{" + labels + "} " + number(sum_) + "\n";
  text += name + "_count{" + labels + "} " + std::to_string(count_) + "\n";
  return text;
}

RequestLatencies::RequestLatencies()
    : time_to_first_token(kTtftBuckets),
      time_per_output_token(kTpotBuckets),
      e2e_latency(kE2eBuckets),
      prompt_tokens(kTokenBuckets),
      generation_tokens(kTokenBuckets) {}

void RequestLatencies::observe_finished(const RequestOutput& out, double e2e_seconds) {
  if (out.num_output_tokens > 0) time_to_first_token.observe(out.time_to_first_token_s);
  // TPOT is defined from the second token on.
  if (out.num_output_tokens > 1) time_per_output_token.observe(out.time_per_output_token_s);
  e2e_latency.observe(e2e_seconds);
  prompt_tokens.observe(out.num_prompt_tokens);
  generation_tokens.observe(out.num_output_tokens);
}

}  // namespace folio::server
