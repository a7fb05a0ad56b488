// The part of panel_gemm.h that runs before any AMX check: which weights have a panel path.
// Compiled without SIMD flags.
#include "backend/cpu/quant/panel_gemm.h"

namespace folio::cpu {

bool amx_panel_gemm_supports(DType weight_type, int64_t rows, int64_t cols) {
  const bool type = weight_type == DType::Q4_0 || weight_type == DType::Q4_1 || weight_type == DType::Q8_0;
  return type && rows > 0 && rows % 16 == 0 && cols > 0 && cols % 32 == 0;
}

}  // namespace folio::cpu
