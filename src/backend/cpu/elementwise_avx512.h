// Element-wise activations compiled for AVX-512 (elementwise_avx512.cpp); call only where the
// CPU has it. Same formulas as CpuBackend's scalar loops, with vector_exp_avx512.h's exp.
#pragma once

#include <cstdint>

namespace folio::cpu {

// out = silu(gate) * up = gate / (1 + exp(-gate)) * up.
void swiglu_avx512(const float* gate, const float* up, float* out, int64_t n);

}  // namespace folio::cpu
