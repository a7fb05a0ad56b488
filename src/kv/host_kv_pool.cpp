#include "kv/host_kv_pool.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace folio {

HostKvPool::HostKvPool(const KvCacheShape& device_shape, int32_t num_blocks, int32_t num_staging)
    : shape_(device_shape),
      num_blocks_(num_blocks),
      elements_per_half_(device_shape.half_block_bytes()),
      data_(static_cast<size_t>(num_blocks) * device_shape.num_layers * 2 * elements_per_half_),
      num_staging_(num_staging),
      staging_(static_cast<size_t>(num_staging) * device_shape.bytes_per_staging_block()) {
  shape_.num_blocks = num_blocks;
}

size_t HostKvPool::staging_half_offset(int32_t host_staging, int32_t layer, int32_t half) const {
  assert(host_staging >= 0 && host_staging < num_staging_);
  return ((static_cast<size_t>(host_staging) * shape_.num_layers + layer) * 2 + half) * shape_.half_staging_bytes();
}

void HostKvPool::copy_staging_to_host(const KvCacheStorage& device, int32_t device_staging, int32_t host_staging) {
  for (int32_t layer = 0; layer < shape_.num_layers; ++layer) {
    std::ranges::copy(device.staging_keys(layer, device_staging),
                      staging_.data() + staging_half_offset(host_staging, layer, 0));
    std::ranges::copy(device.staging_values(layer, device_staging),
                      staging_.data() + staging_half_offset(host_staging, layer, 1));
  }
}

void HostKvPool::copy_staging_from_host(int32_t host_staging, KvCacheStorage& device, int32_t device_staging) const {
  const size_t half = shape_.half_staging_bytes();
  for (int32_t layer = 0; layer < shape_.num_layers; ++layer) {
    const uint8_t* keys = staging_.data() + staging_half_offset(host_staging, layer, 0);
    const uint8_t* values = staging_.data() + staging_half_offset(host_staging, layer, 1);
    std::copy(keys, keys + half, device.staging_keys(layer, device_staging).begin());
    std::copy(values, values + half, device.staging_values(layer, device_staging).begin());
  }
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
