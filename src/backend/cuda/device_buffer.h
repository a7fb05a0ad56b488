// An owning device allocation: cudaMalloc at construction, cudaFree at destruction, moves only.
// Allocations happen at setup (weights, activations, KV pool), never per step.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

namespace folio::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    DeviceBuffer(std::move(other)).swap(*this);
    return *this;
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }

  // Returns the error; the buffer stays empty on failure.
  cudaError_t allocate(size_t bytes) {
    DeviceBuffer().swap(*this);
    if (bytes == 0) return cudaSuccess;
    const cudaError_t error = cudaMalloc(&data_, bytes);
    if (error == cudaSuccess) bytes_ = bytes;
    else data_ = nullptr;
    return error;
  }

  template <typename T = void>
  T* get() const { return static_cast<T*>(data_); }
  size_t bytes() const { return bytes_; }

 private:
  void swap(DeviceBuffer& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
  }
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Pinned host memory: what cudaMemcpyAsync needs to overlap and what swap blocks live in.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& other) noexcept { swap(other); }
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept {
    PinnedBuffer(std::move(other)).swap(*this);
    return *this;
  }
  ~PinnedBuffer() {
    if (data_ != nullptr) cudaFreeHost(data_);
  }

  cudaError_t allocate(size_t bytes) {
    PinnedBuffer().swap(*this);
    if (bytes == 0) return cudaSuccess;
    const cudaError_t error = cudaMallocHost(&data_, bytes);
    if (error == cudaSuccess) bytes_ = bytes;
    else data_ = nullptr;
    return error;
  }

  template <typename T = void>
  T* get() const { return static_cast<T*>(data_); }
  size_t bytes() const { return bytes_; }

 private:
  void swap(PinnedBuffer& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
  }
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace folio::cuda
