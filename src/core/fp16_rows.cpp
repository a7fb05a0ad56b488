#include "core/fp16_rows.h"

#include "core/cpu_features.h"
#include "core/fp16.h"

namespace folio {
namespace {
bool has_f16c() {
  static const bool supported = cpu_has_f16c() && __builtin_cpu_supports("avx2");
  return supported;
}
}  // namespace

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) {
  if (has_f16c()) return detail::fp16_to_fp32_row_f16c(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}

void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) {
  if (has_f16c()) return detail::fp32_to_fp16_row_f16c(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

}  // namespace folio
