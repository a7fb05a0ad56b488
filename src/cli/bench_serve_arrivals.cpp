#include "cli/bench_serve_arrivals.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace folio::cli {

std::vector<double> poisson_arrival_times_s(int32_t num_requests, double rate, uint64_t seed) {
  std::vector<double> times(static_cast<size_t>(std::max(num_requests, 0)), 0.0);
  if (std::isinf(rate) || times.empty()) return times;
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  for (size_t i = 1; i < times.size(); ++i) times[i] = times[i - 1] + gap(rng);
  return times;
}

}  // namespace folio::cli
