// A fixed-size array of trivially copyable values that starts zeroed without touching its
// memory: std::calloc's large allocations are fresh pages that the OS zeroes on first use, so a
// 256 MiB KV pool costs nothing until blocks are written (std::vector would write every byte at
// construction, and keep the whole pool resident from the start).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <span>
#include <type_traits>

namespace folio {

template <typename T>
class ZeroedArray {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_default_constructible_v<T>);

 public:
  ZeroedArray() = default;
  explicit ZeroedArray(size_t size) : size_(size) {
    if (size == 0) return;
    data_.reset(static_cast<T*>(std::calloc(size, sizeof(T))));
    if (!data_) throw std::bad_alloc();
  }

  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  size_t size() const { return size_; }
  std::span<T> span() { return {data_.get(), size_}; }
  std::span<const T> span() const { return {data_.get(), size_}; }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data_;
  size_t size_ = 0;
};

}  // namespace folio
