#include "backend/cuda/gather_rows.h"

namespace folio::cuda {
namespace {

// One block per output row; float4 when the row allows it (hidden sizes are multiples of 4).
__global__ void gather_rows_kernel(const float* __restrict__ x, const int32_t* __restrict__ rows, int64_t dim,
                                   float* __restrict__ out) {
  const int64_t src = static_cast<int64_t>(rows[blockIdx.x]) * dim;
  const int64_t dst = static_cast<int64_t>(blockIdx.x) * dim;
  if (dim % 4 == 0) {
    const auto* in4 = reinterpret_cast<const float4*>(x + src);
    auto* out4 = reinterpret_cast<float4*>(out + dst);
    for (int64_t i = threadIdx.x; i < dim / 4; i += blockDim.x) out4[i] = in4[i];
  } else {
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) out[dst + i] = x[src + i];
  }
}

// One thread per output element, a block per 256 columns of a row: at decode (one row) a
// 14,336-wide gather is 56 blocks each reading its indices and values once, instead of one
// block walking the row (which measured ~12 us a gather on an H100, 30% of a decode step).
__global__ void gather_columns_kernel(const uint16_t* __restrict__ x, const int32_t* __restrict__ order, int64_t dim,
                                      uint16_t* __restrict__ out) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= dim) return;
  const int64_t row = static_cast<int64_t>(blockIdx.y) * dim;
  out[row + c] = x[row + order[c]];
}

}  // namespace

void gather_columns_bf16(const uint16_t* x, const int32_t* order, int64_t num_rows, int64_t dim, uint16_t* out,
                         CUstream_st* stream) {
  if (num_rows <= 0) return;
  const dim3 grid(static_cast<unsigned>((dim + 255) / 256), static_cast<unsigned>(num_rows));
  gather_columns_kernel<<<grid, 256, 0, stream>>>(x, order, dim, out);
}

void gather_rows(const float* x, const int32_t* rows, int32_t num_rows, int64_t dim, float* out, CUstream_st* stream) {
  if (num_rows <= 0) return;
  gather_rows_kernel<<<num_rows, 256, 0, stream>>>(x, rows, dim, out);
}

}  // namespace folio::cuda
