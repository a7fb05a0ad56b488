// Copies selected rows of the residual stream into a compact buffer: the rows whose logits a
// step wants go through the final norm and the vocabulary GEMM, the others do not.
#pragma once

#include <cstdint>

struct CUstream_st;

namespace folio::cuda {

// out[r] = x[rows[r]].  x: (*, dim) fp32; rows: (num_rows,) device; out: (num_rows, dim) fp32.
void gather_rows(const float* x, const int32_t* rows, int32_t num_rows, int64_t dim, float* out, CUstream_st* stream);

// The columns' counterpart, for the GEMMs of act-order weights (DeviceMatrix::input_order):
// out[r][c] = x[r][order[c]].  x, out: (num_rows, dim) bf16 bits; order: (dim,) device.
void gather_columns_bf16(const uint16_t* x, const int32_t* order, int64_t num_rows, int64_t dim, uint16_t* out,
                         CUstream_st* stream);

}  // namespace folio::cuda
