// Whole-row fp16 <-> fp32 conversion, with an F16C path chosen at run time (the KV cache is
// stored in fp16 and converted on every attention read).
#pragma once

#include <cstdint>

namespace folio {

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n);
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n);

namespace detail {
void fp16_to_fp32_row_f16c(const uint16_t* src, float* dst, int64_t n);
void fp32_to_fp16_row_f16c(const float* src, uint16_t* dst, int64_t n);
}  // namespace detail

}  // namespace folio
