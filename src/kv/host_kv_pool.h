// Host memory for swapped-out KV blocks: the same K/V bytes as a device block, stored block
// after block so that one host block is one contiguous range (one transfer per layer and
// K/V half when the device is a GPU). Which host block holds what is KvCacheManager's job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/zeroed_array.h"

#include "kv/kv_cache_storage.h"

namespace folio {

class HostKvPool {
 public:
  // Same layer count, block size, heads and head size as the device storage it backs;
  // num_blocks counts block 0, which BlockPool reserves here too. num_staging: host staging
  // blocks for the unsealed blocks of swapped sequences (residual formats only).
  HostKvPool(const KvCacheShape& device_shape, int32_t num_blocks, int32_t num_staging = 0);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t num_staging() const { return num_staging_; }
  size_t bytes() const { return data_.size() + staging_.size(); }

  void copy_to_host(const KvCacheStorage& device, int32_t device_block, int32_t host_block);
  void copy_from_host(int32_t host_block, KvCacheStorage& device, int32_t device_block) const;
  void copy_staging_to_host(const KvCacheStorage& device, int32_t device_staging, int32_t host_staging);
  void copy_staging_from_host(int32_t host_staging, KvCacheStorage& device, int32_t device_staging) const;

  // One layer's K (or V) of one host block, in the device storage's format and layout.
  std::span<const uint8_t> block_keys(int32_t host_block, int32_t layer) const;
  std::span<const uint8_t> block_values(int32_t host_block, int32_t layer) const;

 private:
  size_t half_offset(int32_t host_block, int32_t layer, int32_t half) const;
  size_t staging_half_offset(int32_t host_staging, int32_t layer, int32_t half) const;

  KvCacheShape shape_;
  int32_t num_blocks_;
  size_t elements_per_half_;   // bytes of one layer's K (or V) of one block
  ZeroedArray<uint8_t> data_;  // (num_blocks, num_layers, 2 [K, V], half block bytes)
  int32_t num_staging_;
  ZeroedArray<uint8_t> staging_;  // (num_staging, num_layers, 2 [K, V], half staging bytes)
};

}  // namespace folio
