// OCP FP8 E4M3 ("fn": no infinities, largest finite 448) on the host: the KV cache's fp8 format
// and the GPU's FP8 weights use the same conversion, so both round alike.
#pragma once

#include <cstdint>

namespace folio {

inline constexpr float kE4M3Max = 448.0f;

// Float -> E4M3 with round-to-nearest-even, saturating to +-448 (NaN stays NaN, 0x7f).
uint8_t fp8_e4m3_from_float(float x);
// E4M3 -> float, exact (every E4M3 value is a float).
float fp8_e4m3_to_float(uint8_t bits);
// The 256 values, for table lookups in kernels.
const float* fp8_e4m3_values();

}  // namespace folio
