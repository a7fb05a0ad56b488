#include "kv/host_kv_pool.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace folio {

HostKvPool::HostKvPool(const KvCacheShape& device_shape, int32_t num_blocks)
    : shape_(device_shape),
      num_blocks_(num_blocks),
      elements_per_half_(device_shape.half_block_bytes()),
      data_(static_cast<size_t>(num_blocks) * device_shape.num_layers * 2 * elements_per_half_) {
  shape_.num_blocks = num_blocks;
}

size_t HostKvPool::half_offset(int32_t host_block, int32_t layer, int32_t half) const {
  assert(host_block >= 0 && host_block < num_blocks_);
  assert(layer >= 0 && layer < shape_.num_layers);
  return ((static_cast<size_t>(host_block) * shape_.num_layers + layer) * 2 + half) * elements_per_half_;
}

void HostKvPool::copy_to_host(const KvCacheStorage& device, int32_t device_block, int32_t host_block) {
  for (int32_t layer = 0; layer < shape_.num_layers; ++layer) {
    std::ranges::copy(device.block_keys(layer, device_block), data_.data() + half_offset(host_block, layer, 0));
    std::ranges::copy(device.block_values(layer, device_block), data_.data() + half_offset(host_block, layer, 1));
  }
}

void HostKvPool::copy_from_host(int32_t host_block, KvCacheStorage& device, int32_t device_block) const {
  for (int32_t layer = 0; layer < shape_.num_layers; ++layer) {
    std::ranges::copy(block_keys(host_block, layer), device.block_keys(layer, device_block).begin());
    std::ranges::copy(block_values(host_block, layer), device.block_values(layer, device_block).begin());
  }
}

std::span<const uint8_t> HostKvPool::block_keys(int32_t host_block, int32_t layer) const {
  return std::as_const(data_).span().subspan(half_offset(host_block, layer, 0), elements_per_half_);
}

std::span<const uint8_t> HostKvPool::block_values(int32_t host_block, int32_t layer) const {
  return std::as_const(data_).span().subspan(half_offset(host_block, layer, 1), elements_per_half_);
}

}  // namespace folio
