// Element-wise activations compiled for AVX-512 (elementwise_avx512.cpp); call only where the
// CPU has it. Same formulas as CpuBackend's scalar loops, with vector_exp_avx512.h's exp.
#pragma once

#include <cstdint>

namespace folio::cpu {

// out = silu(gate) * up = gate / (1 + exp(-gate)) * up.
void swiglu_avx512(const float* gate, const float* up, float* out, int64_t n);

// out = gelu_tanh(gate) * up (Gemma's GeGLU): 0.5 gate (1 + tanh(sqrt(2 / pi) (gate + 0.044715
// gate^3))) * up, computed as gate / (1 + exp(-2 sqrt(2 / pi) (...))) * up.
void geglu_tanh_avx512(const float* gate, const float* up, float* out, int64_t n);

// vector_exp_avx512.h's two exps over an array, for tests.
void exp_avx512_array(const float* x, float* y, int64_t n);
void exp_fast_avx512_array(const float* x, float* y, int64_t n);

}  // namespace folio::cpu
