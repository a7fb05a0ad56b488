// The p-th percentile of a sample, as the benchmarks report it (bench serve, bench host).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace folio::cli {

// The p-th percentile (0-100) with linear interpolation between the closest ranks (numpy's
// default, which vLLM's report uses); 0 for no values.
inline double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, values.size() - 1);
  const double fraction = rank - static_cast<double>(below);
  return values[below] + fraction * (values[above] - values[below]);
}

}  // namespace folio::cli
