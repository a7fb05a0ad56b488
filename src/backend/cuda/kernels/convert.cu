// fp16 -> bf16 in place on the device: F16 weights are uploaded as stored and converted where
// they land, so no host pass touches them (both are 2 bytes, so the buffer is reused). Rounds
// to nearest even, as the host's fp32_to_bf16 does (fp16 -> fp32 is exact).
#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/kernels/kernels.h"

namespace folio::cuda {
namespace {

using namespace detail;

__global__ void f16_to_bf16_kernel(uint16_t* data, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    data[i] = float_to_bf16_bits(__half2float(__ushort_as_half(data[i])));
  }
}

}  // namespace

void f16_to_bf16_inplace(uint16_t* data, int64_t n, Stream stream) {
  if (n == 0) return;
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 65536);
  f16_to_bf16_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(data, n);
}

}  // namespace folio::cuda
