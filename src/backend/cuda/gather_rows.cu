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

// One block per row: the row is read where the order points (it stays in L1 / L2: a few KB)
// and written in order, coalesced.
__global__ void gather_columns_kernel(const uint16_t* __restrict__ x, const int32_t* __restrict__ order, int64_t dim,
                                      uint16_t* __restrict__ out) {
  const uint16_t* in = x + static_cast<int64_t>(blockIdx.x) * dim;
  uint16_t* row = out + static_cast<int64_t>(blockIdx.x) * dim;
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) row[c] = in[order[c]];
}

}  // namespace

void gather_columns_bf16(const uint16_t* x, const int32_t* order, int64_t num_rows, int64_t dim, uint16_t* out,
                         CUstream_st* stream) {
  if (num_rows <= 0) return;
  gather_columns_kernel<<<static_cast<unsigned>(num_rows), 256, 0, stream>>>(x, order, dim, out);
}

void gather_rows(const float* x, const int32_t* rows, int32_t num_rows, int64_t dim, float* out, CUstream_st* stream) {
  if (num_rows <= 0) return;
  gather_rows_kernel<<<num_rows, 256, 0, stream>>>(x, rows, dim, out);
}

}  // namespace folio::cuda
