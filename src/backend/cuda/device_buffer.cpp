#include "backend/cuda/device_buffer.h"

#include "backend/cuda/cuda_check.h"

namespace folio::cuda {

Status DeviceMemory::allocate(void** ptr, size_t bytes, const char* what) {
  return cuda_status(cudaMalloc(ptr, bytes), what);
}

void DeviceMemory::release(void* ptr) {
  cudaFree(ptr);
}

Status PinnedMemory::allocate(void** ptr, size_t bytes, const char* what) {
  return cuda_status(cudaMallocHost(ptr, bytes), what);
}

void PinnedMemory::release(void* ptr) {
  cudaFreeHost(ptr);
}

}  // namespace folio::cuda
