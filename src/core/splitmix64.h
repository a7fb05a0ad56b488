// SplitMix64 (Steele, Lea and Flood): one well-mixed 64-bit value per input, the same on every
// run and machine. The engine's per-request random streams and the host-only executor's tokens
// draw from it.
#pragma once

#include <cstdint>

namespace folio {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace folio
