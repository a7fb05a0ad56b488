// avx512 kernels (placeholder until the SIMD paths land).
#include "backend/cpu/quant/quant_internal.h"

namespace folio::cpu::quant {

KernelFns avx512_kernel_fns(DType weight_type) { return {}; }

}  // namespace folio::cpu::quant
