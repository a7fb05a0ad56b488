// Run-time dispatch: one QuantKernels per (weight type, path), built once from the per-path
// lookups. This file is compiled without SIMD flags; it calls a SIMD file's lookup only after
// the CPU (and the OS, which must save the wider registers) has been checked for that path.
#include "backend/cpu/quant/quant_kernels.h"
#include "core/cpu_features.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "backend/cpu/quant/quant_internal.h"

namespace folio::cpu {
namespace {

using quant::KernelFns;

constexpr std::array<DType, 11> kWeightTypes = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0,
                                                DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                                                DType::Q4_K, DType::Q5_K, DType::Q6_K};
constexpr int kNumIsas = 4;

bool cpu_has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
}

bool cpu_has_avx512() {
  __builtin_cpu_init();
  return cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vnni");
}

KernelFns path_fns(DType type, Isa isa) {
  switch (isa) {
    case Isa::kScalar: return quant::scalar_kernel_fns(type);
    case Isa::kAvx2: return quant::avx2_kernel_fns(type);
    case Isa::kAvx512: return quant::avx512_kernel_fns(type);
    case Isa::kAmx: return {};  // AMX's matmuls are panel_gemm.h's; the rest is AVX-512's
  }
  return {};
}

// Kernels for `type` that take, member by member, the highest path up to `isa` that has one.
QuantKernels build(DType type, Isa isa) {
  QuantKernels kernels{type, ::folio::quant::activation_format(type), Isa::kScalar, nullptr, nullptr, nullptr};
  for (int level = 0; level <= static_cast<int>(isa); ++level) {
    const KernelFns fns = path_fns(type, static_cast<Isa>(level));
    if (fns.dequantize_row != nullptr) kernels.dequantize_row = fns.dequantize_row;
    if (fns.convert_activation_row != nullptr) {
      kernels.convert_activation_row = fns.convert_activation_row;
    }
    if (fns.dot_rows != nullptr) {
      kernels.dot_rows = fns.dot_rows;
      kernels.isa = static_cast<Isa>(level);
    }
  }
  return kernels;
}

struct KernelTable {
  // [isa][index in kWeightTypes]; rows for unsupported paths repeat the best supported one.
  std::array<std::array<QuantKernels, kWeightTypes.size()>, kNumIsas> entries;

  KernelTable() {
    const Isa best = detect_isa();
    for (int level = 0; level < kNumIsas; ++level) {
      const Isa isa = static_cast<int>(best) < level ? best : static_cast<Isa>(level);
      for (size_t t = 0; t < kWeightTypes.size(); ++t) entries[level][t] = build(kWeightTypes[t], isa);
    }
  }
};

}  // namespace

// FOLIO_CPU_ISA's cap, or kAmx (no cap) when unset; an unknown value is reported once and ignored.
static Isa isa_cap() {
  const char* value = std::getenv("FOLIO_CPU_ISA");
  if (value == nullptr || *value == '\0') return Isa::kAmx;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAmx}) {
    if (isa_name(isa) == value) return isa;
  }
  std::fprintf(stderr, "folio: FOLIO_CPU_ISA=%s is not one of scalar, avx2, avx512, amx; ignored\n", value);
  return Isa::kAmx;
}

Isa detect_isa() {
  static const Isa best = [] {
    const Isa cap = isa_cap();
    auto allowed = [&](Isa isa) { return static_cast<int>(isa) <= static_cast<int>(cap); };
    // AMX last: asking for it makes a system call that grants this process the tile state.
    if (allowed(Isa::kAvx512) && cpu_has_avx512()) {
      return allowed(Isa::kAmx) && cpu_has_amx_int8() ? Isa::kAmx : Isa::kAvx512;
    }
    if (allowed(Isa::kAvx2) && cpu_has_avx2()) return Isa::kAvx2;
    return Isa::kScalar;
  }();
  return best;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kAmx: return "amx";
  }
  return "unknown";
}

bool isa_supported(Isa isa) {
  return static_cast<int>(isa) <= static_cast<int>(detect_isa());
}

const QuantKernels* quant_kernels(DType type, Isa isa) {
  static const KernelTable table;
  for (size_t t = 0; t < kWeightTypes.size(); ++t) {
    if (kWeightTypes[t] == type) return &table.entries[static_cast<int>(isa)][t];
  }
  return nullptr;
}

}  // namespace folio::cpu
