// Programmatic dependent launch (Hopper, sm_90+): a kernel launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may start before the kernel ahead of it in
// the stream has finished, once every block of that one has called let_next_kernel_start() (or
// exited). Until it calls wait_for_previous_kernel() it must not read anything the kernel ahead
// writes, nor write anything that kernel reads: the weight-streaming kernels (the small GEMMs,
// the GEMV) only prefetch their weights into L2 there, so a decode step's memory-bound row ops
// (RMSNorm, SwiGLU, attention) overlap the next product's weight traffic instead of leaving the
// memory idle while they run and the next kernel launches. Ordering is transitive: a kernel that
// waited for the one ahead finished after it, so later kernels see both.
//
// Before sm_90 the device calls compile to nothing and launch_kernel() drops the attribute:
// ordinary stream order.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace folio::cuda {

__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void let_next_kernel_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// bytes (a multiple of 16) from p (16-byte aligned) into L2, without registers or a wait.
__device__ __forceinline__ void prefetch_l2(const void* p, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...), as a programmatic dependent of the kernel
// ahead when `programmatic` (the caller checked the device is sm_90+).
template <class... Params, class... Args>
void launch_kernel(bool programmatic, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                   cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = programmatic ? 1 : 0;
  cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
}

}  // namespace folio::cuda
