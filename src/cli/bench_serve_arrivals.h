// When each request of `folio bench serve` is sent: a Poisson process of the given rate
// (independent exponential gaps of mean 1 / rate), the first request at time 0, or every
// request at once when the rate is infinite. Seeded, so that two servers see the same schedule.
#pragma once

#include <cstdint>
#include <vector>

namespace folio::cli {

// Seconds from the start, non-decreasing. rate: requests per second, > 0 (infinity allowed).
std::vector<double> poisson_arrival_times_s(int32_t num_requests, double rate, uint64_t seed);

}  // namespace folio::cli
