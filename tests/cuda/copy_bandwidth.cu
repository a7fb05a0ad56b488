// The bandwidth roofline of the memory-bound benchmarks: a plain vectorized device copy
// (16-byte loads and stores, four loads in flight per thread, grid-stride, a full-occupancy
// grid). cudaMemcpyAsync's device-to-device path measured about half of what a kernel like
// this moves on the H200, which made every pct_of_copy look better than it was.
#include "check_util.h"

namespace folio::cuda::check {
namespace {

constexpr int kCopyThreads = 256;
constexpr int kCopyUnroll = 4;

__global__ void __launch_bounds__(kCopyThreads)
    copy16_kernel(uint4* __restrict__ dst, const uint4* __restrict__ src, size_t count) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kCopyUnroll - 1) * stride < count; i += kCopyUnroll * stride) {
    uint4 v[kCopyUnroll];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) v[u] = __ldcs(src + i + u * stride);
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) __stcs(dst + i + u * stride, v[u]);
  }
  for (; i < count; i += stride) __stcs(dst + i, __ldcs(src + i));
}

}  // namespace

void copy_kernel_16(void* dst, const void* src, size_t bytes, int sm_count, cudaStream_t stream) {
  const size_t count = bytes / 16;
  const int blocks = sm_count * (2048 / kCopyThreads);
  copy16_kernel<<<blocks, kCopyThreads, 0, stream>>>(static_cast<uint4*>(dst), static_cast<const uint4*>(src), count);
}

}  // namespace folio::cuda::check
