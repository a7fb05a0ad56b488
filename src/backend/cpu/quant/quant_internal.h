// How the per-ISA kernel files hand their functions to the dispatcher (quant_kernels.cpp).
// Each *_avx2.cpp / *_avx512.cpp file is compiled with its -m flags; the dispatcher, compiled
// without them, calls a path's lookup function only after checking the CPU supports that path.
// Internal to src/backend/cpu/quant/.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "quant/block_formats.h"
#include "quant/float_rounding.h"
#include "quant/formats.h"

namespace folio::cpu::quant {

// The block layouts, rounding helpers and reference conversions of quant/, unqualified here.
using namespace ::folio::quant;

using DequantizeRowFn = void (*)(const void* src, float* dst, int64_t n);
using ConvertActivationRowFn = void (*)(const float* src, void* dst, int64_t n);
using DotRowsFn = void (*)(int64_t n, const void* weight_row, const void* activations, size_t act_row_bytes,
                           int num_rows, float* out);

// One path's functions for one weight type; a null member means "this path has none, use a
// lower one".
struct KernelFns {
  DequantizeRowFn dequantize_row = nullptr;
  ConvertActivationRowFn convert_activation_row = nullptr;
  DotRowsFn dot_rows = nullptr;
};

// Lookups, one per path. The scalar path has every member for every weight type.
KernelFns scalar_kernel_fns(DType weight_type);
KernelFns scalar_kernel_fns_k(DType weight_type);  // the K-quants' part of it
KernelFns avx2_kernel_fns(DType weight_type);      // call only if the CPU has AVX2+FMA+F16C
KernelFns avx512_kernel_fns(DType weight_type);    // call only if the CPU has AVX-512 F/BW/VL/DQ/VNNI
KernelFns avx2_kernel_fns_k(DType weight_type);    // the K-quants' parts of the two above
KernelFns avx512_kernel_fns_k(DType weight_type);

}  // namespace folio::cpu::quant
