// Two float helpers that keep quantized formats bit-exact on every path (scalar, AVX2, AVX-512,
// CUDA): rounding as the SIMD conversion instructions round, and a product that is never fused
// into a multiply-add. Internal linkage, so SIMD files may include this too.
#pragma once

namespace folio::quant {

// Round half to even, as the SIMD rounding instructions do in their default mode; used by
// every activation converter so that all paths produce the same bytes.
static inline float round_half_even(float x) {
  return __builtin_rintf(x);
}

// Returns x unchanged but hides it from the optimizer, so that `keep_rounded(a * b) + c` is
// computed as a rounded product then a sum, never as one fused multiply-add (GCC contracts
// a * b + c, even written with intrinsics, where FMA is enabled). Dequantizers use it to stay
// bit-exact with GGUF's float formulas on every path.
static inline float keep_rounded(float x) {
  __asm__("" : "+x"(x));
  return x;
}

}  // namespace folio::quant
