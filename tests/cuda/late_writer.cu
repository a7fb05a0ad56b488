// A kernel ahead that writes late, for the programmatic-launch checks (programmatic_launch.cuh):
// it lets its dependents start at once, waits about `delay_us`, then copies its sources into
// place. A product launched programmatically behind it that read its inputs (or its beta
// output) before griddepcontrol.wait would read the stale values, and its check would fail.
#include <cuda_runtime.h>

#include <functional>
#include <vector>

#include "backend/cuda/programmatic_launch.cuh"
#include "check_util.h"

namespace folio::cuda::check {
namespace {

__global__ void late_copy_kernel(const uint8_t* src0, uint8_t* dst0, size_t bytes0, const uint8_t* src1, uint8_t* dst1,
                                 size_t bytes1, long long delay_cycles) {
  let_next_kernel_start();
  const long long start = clock64();
  while (clock64() - start < delay_cycles) {
  }
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < bytes0; i += stride)
    dst0[i] = src0[i];
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < bytes1; i += stride)
    dst1[i] = src1[i];
}

void late_copy(const void* src0, void* dst0, size_t bytes0, const void* src1, void* dst1, size_t bytes1, int delay_us,
               cudaStream_t stream) {
  int khz = 0;
  cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
  // Few blocks: the dependents' blocks must find room beside them.
  late_copy_kernel<<<4, 256, 0, stream>>>(static_cast<const uint8_t*>(src0), static_cast<uint8_t*>(dst0), bytes0,
                                          static_cast<const uint8_t*>(src1), static_cast<uint8_t*>(dst1), bytes1,
                                          static_cast<long long>(delay_us) * khz / 1000);
}

}  // namespace

std::vector<float> run_behind_late_writer(const uint16_t* x, size_t x_elems, const std::vector<float>& y0,
                                          const std::function<void(const uint16_t*, float*, cudaStream_t)>& product) {
  DeviceBuffer<float> d_y0(y0), d_y(y0.size());
  DeviceBuffer<uint16_t> d_x(x_elems);
  d_x.poison();
  d_y.poison();
  late_copy(x, d_x.get(), x_elems * 2, d_y0.get(), d_y.get(), y0.size() * 4, 20, check_stream());
  product(d_x.get(), d_y.get(), check_stream());
  sync_or_die("behind a late writer");
  return d_y.download();
}

}  // namespace folio::cuda::check
