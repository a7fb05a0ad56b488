#include <cassert>

#include "backend/cuda/rank_sum.h"

namespace folio::cuda {
namespace {

struct RankInputs {
  const float* p[kMaxRankSumInputs];
};

__global__ void sum_rank_buffers_kernel(RankInputs in, int32_t count, float* out, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float s = in.p[0][i];
    for (int32_t r = 1; r < count; ++r) s += in.p[r][i];
    out[i] = s;
  }
}

__global__ void add_in_place_kernel(float* x, const float* y, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    x[i] += y[i];
  }
}

unsigned grid_for(size_t n) {
  const size_t blocks = (n + 255) / 256;
  return static_cast<unsigned>(blocks < 4096 ? blocks : 4096);
}

}  // namespace

void sum_rank_buffers(const float* const* in, int32_t count, float* out, size_t n, CUstream_st* stream) {
  assert(count >= 1 && count <= kMaxRankSumInputs);
  if (n == 0) return;
  RankInputs inputs{};
  for (int32_t r = 0; r < count; ++r) inputs.p[r] = in[r];
  sum_rank_buffers_kernel<<<grid_for(n), 256, 0, stream>>>(inputs, count, out, n);
}

void add_in_place(float* x, const float* y, size_t n, CUstream_st* stream) {
  if (n == 0) return;
  add_in_place_kernel<<<grid_for(n), 256, 0, stream>>>(x, y, n);
}

}  // namespace folio::cuda
