// How the per-ISA kernel files hand their functions to the dispatcher (quant_kernels.cpp).
// Each *_avx2.cpp / *_avx512.cpp file is compiled with its -m flags; the dispatcher, compiled
// without them, calls a path's lookup function only after checking the CPU supports that path.
// Internal to src/backend/cpu/quant/.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace folio::cpu::quant {

using DequantizeRowFn = void (*)(const void* src, float* dst, int64_t n);
using ConvertActivationRowFn = void (*)(const float* src, void* dst, int64_t n);
using DotRowsFn = void (*)(int64_t n, const void* weight_row, const void* activations,
                           size_t act_row_bytes, int num_rows, float* out);

// One path's functions for one weight type; a null member means "this path has none, use a
// lower one".
struct KernelFns {
  DequantizeRowFn dequantize_row = nullptr;
  ConvertActivationRowFn convert_activation_row = nullptr;
  DotRowsFn dot_rows = nullptr;
};

// Whether folio computes with `type` as a weight type, and its activation partner format (F32
// for the float types). activation_type_for requires is_weight_type.
bool is_weight_type(DType type);
DType activation_type_for(DType weight_type);

// Lookups, one per path. The scalar path has every member for every weight type.
KernelFns scalar_kernel_fns(DType weight_type);
KernelFns scalar_kernel_fns_k(DType weight_type);  // the K-quants' part of it
KernelFns avx2_kernel_fns(DType weight_type);    // call only if the CPU has AVX2+FMA+F16C
KernelFns avx512_kernel_fns(DType weight_type);  // call only if the CPU has AVX-512 F/BW/VL/DQ/VNNI
KernelFns avx2_kernel_fns_k(DType weight_type);    // the K-quants' parts of the two above
KernelFns avx512_kernel_fns_k(DType weight_type);

// Scalar dequantizers of the activation formats (Q8_1, Q8_K), for tests and references.
void dequantize_row_q8_1_scalar(const void* src, float* dst, int64_t n);
void dequantize_row_q8_k_scalar(const void* src, float* dst, int64_t n);

// Round half to even, as the SIMD rounding instructions do in their default mode; used by
// every activation converter so that all paths produce the same bytes.
static inline float round_half_even(float x) { return __builtin_rintf(x); }

// Returns x unchanged but hides it from the optimizer, so that `keep_rounded(a * b) + c` is
// computed as a rounded product then a sum, never as one fused multiply-add (GCC contracts
// a * b + c, even written with intrinsics, where FMA is enabled). Dequantizers use it to stay
// bit-exact with GGUF's float formulas on every path.
static inline float keep_rounded(float x) {
  __asm__("" : "+x"(x));
  return x;
}

}  // namespace folio::cpu::quant
