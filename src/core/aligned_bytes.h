// A byte buffer aligned to a cache line (64 bytes: what 512-bit aligned loads need), owned,
// movable, uninitialized; empty when default-constructed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace folio {

class AlignedBytes {
 public:
  AlignedBytes() = default;
  explicit AlignedBytes(size_t size) : size_(size) {
    if (size == 0) return;
    data_.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (size + 63) / 64 * 64)));
    if (!data_) throw std::bad_alloc();
  }

  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t size_ = 0;
};

}  // namespace folio
