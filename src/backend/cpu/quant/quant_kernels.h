// Dequantization and dot-product kernels for every weight type the CPU backend computes with.
// Weights stay in their stored (GGUF) format; activations are converted once per matmul into
// each weight type's partner format (for example Q8_1 for Q4_1, Q8_K for the K-quants), and
// dot products run on the pair. Each type has a scalar reference and AVX2 / AVX-512 paths
// chosen at run time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/dtype.h"

namespace folio::cpu {

// kAmx: the AVX-512 kernels, and quantized matmuls on AMX tiles where the weight type has them
// (panel_gemm.h).
enum class Isa { kScalar, kAvx2, kAvx512, kAmx };

// The best path this CPU supports (cached), capped by FOLIO_CPU_ISA=scalar|avx2|avx512|amx if
// set: tests and benchmarks run every path on one machine that way.
Isa detect_isa();
std::string_view isa_name(Isa isa);
bool isa_supported(Isa isa);

struct QuantKernels {
  DType weight_type;
  DType activation_type;  // what float activations are converted to before dot products
  Isa isa;                // the path these kernels take
  // n elements (a multiple of the weight type's block size) of a row -> float.
  void (*dequantize_row)(const void* src, float* dst, int64_t n);
  // n float activations -> activation_type (row_bytes(activation_type, n) bytes).
  void (*convert_activation_row)(const float* src, void* dst, int64_t n);
  // out[j] = dot(weight_row, activation row j) for j < num_rows, n elements each; activation
  // rows are act_row_bytes apart. Several activation rows per call let the SIMD paths unpack
  // a weight block once and use it for all of them (prefill).
  void (*dot_rows)(int64_t n, const void* weight_row, const void* activations, size_t act_row_bytes, int num_rows,
                   float* out);
};

// Kernels for `type` on `isa`, or nullptr if folio cannot compute with that type.
// A type without a SIMD path on `isa` gets a lower path (reported in QuantKernels::isa).
const QuantKernels* quant_kernels(DType type, Isa isa);
inline const QuantKernels* quant_kernels(DType type) {
  return quant_kernels(type, detect_isa());
}

}  // namespace folio::cpu
