// An owning CUDA allocation, device or pinned host memory by its Memory parameter: allocated at
// setup (weights, activations, KV pool, staging), freed at destruction, moves only; never
// allocated per step. Plain C++ (the CUDA calls are in device_buffer.cpp), so headers holding
// buffers need no CUDA header.
#pragma once

#include <cstddef>
#include <utility>

#include "core/status.h"

namespace folio::cuda {

// cudaMalloc / cudaFree.
struct DeviceMemory {
  static Status allocate(void** ptr, size_t bytes, const char* what);
  static void release(void* ptr);
};
// cudaMallocHost / cudaFreeHost: what cudaMemcpyAsync needs to overlap, and where swapped-out KV
// blocks live.
struct PinnedMemory {
  static Status allocate(void** ptr, size_t bytes, const char* what);
  static void release(void* ptr);
};

template <typename Memory>
class CudaBuffer {
 public:
  CudaBuffer() = default;
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;
  CudaBuffer(CudaBuffer&& other) noexcept { swap(other); }
  CudaBuffer& operator=(CudaBuffer&& other) noexcept {
    CudaBuffer(std::move(other)).swap(*this);
    return *this;
  }
  ~CudaBuffer() {
    if (data_ != nullptr) Memory::release(data_);
  }

  // Replaces the buffer; it stays empty on failure (the error names `what`).
  Status allocate(size_t bytes, const char* what) {
    CudaBuffer().swap(*this);
    if (bytes == 0) return Status::ok();
    void* ptr = nullptr;
    if (Status s = Memory::allocate(&ptr, bytes, what); !s) return s;
    data_ = ptr;
    bytes_ = bytes;
    return Status::ok();
  }

  template <typename T = void>
  T* get() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void swap(CudaBuffer& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
  }
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

using DeviceBuffer = CudaBuffer<DeviceMemory>;
using PinnedBuffer = CudaBuffer<PinnedMemory>;

}  // namespace folio::cuda
