#include "core/fp8.h"

#include <array>
#include <cmath>

#include "core/fp16.h"

namespace folio {

uint8_t fp8_e4m3_from_float(float x) {
  const uint32_t bits = fp32_to_bits(x);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);  // NaN
  const float a = fp32_from_bits(abs_bits);
  if (a >= kE4M3Max) return static_cast<uint8_t>(sign | 0x7eu);  // saturate (inf too)
  if (a < 0.015625f) {
    // Subnormal range (below 2^-6): units of 2^-9, rounded to nearest even; 8 units is the
    // smallest normal, whose encoding 0x08 is the same integer.
    const float units = std::nearbyint(a * 512.0f);
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(units));
  }
  // Normal: keep 3 of the 23 mantissa bits, round to nearest even; a carry bumps the exponent.
  const uint32_t rounded = abs_bits + 0x7ffffu + ((abs_bits >> 20) & 1u);
  const int32_t exponent = static_cast<int32_t>(rounded >> 23) - 127 + 7;
  const uint32_t mantissa = (rounded >> 20) & 7u;
  const uint32_t code = (static_cast<uint32_t>(exponent) << 3) | mantissa;
  return static_cast<uint8_t>(sign | (code > 0x7eu ? 0x7eu : code));
}

float fp8_e4m3_to_float(uint8_t bits) {
  const float sign = (bits & 0x80u) ? -1.0f : 1.0f;
  const int32_t exponent = (bits >> 3) & 0xf;
  const int32_t mantissa = bits & 7;
  if (exponent == 15 && mantissa == 7) return std::nanf("");
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);
  return sign * std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
}

const float* fp8_e4m3_values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[static_cast<size_t>(i)] = fp8_e4m3_to_float(static_cast<uint8_t>(i));
    return t;
  }();
  return table.data();
}

}  // namespace folio
