// This process's peak resident set size.
#pragma once

#include <cstdint>

namespace folio {

// Bytes: /proc/self/status's VmHWM on Linux (the peak of this process's own address space;
// getrusage's ru_maxrss would also count the process it was forked from when that was larger,
// as a benchmark harness's Python parent is), else getrusage's ru_maxrss.
int64_t peak_resident_bytes();

}  // namespace folio
