#include "kv/kv_cache_storage.h"

#include <algorithm>
#include <cassert>

namespace folio {

namespace {
size_t blocks_bytes(const KvCacheShape& s) {
  return s.half_block_bytes() * s.num_blocks;
}
size_t layer_bytes(const KvCacheShape& s) {
  return blocks_bytes(s) + s.half_staging_bytes() * s.num_staging_blocks;
}
}  // namespace

KvCacheStorage::KvCacheStorage(const KvCacheShape& shape)
    : shape_(shape), k_(layer_bytes(shape) * shape.num_layers), v_(layer_bytes(shape) * shape.num_layers) {
  assert(shape.num_staging_blocks == 0 || kv_format_has_residual(shape.format));
}

KvLayerView KvCacheStorage::layer(int32_t index) {
  assert(index >= 0 && index < shape_.num_layers);
  const size_t offset = layer_bytes(shape_) * index;
  KvLayerView view{k_.data() + offset, v_.data() + offset,  shape_.num_blocks + shape_.num_overlay_blocks(),
                   shape_.block_size,  shape_.num_kv_heads, shape_.head_dim,
                   shape_.format};
  if (shape_.num_staging_blocks > 0) {
    view.staging_k = reinterpret_cast<uint16_t*>(view.k + blocks_bytes(shape_));
    view.staging_v = reinterpret_cast<uint16_t*>(view.v + blocks_bytes(shape_));
    view.num_staging = shape_.num_staging_blocks;
  }
  return view;
}

size_t KvCacheStorage::staging_offset(int32_t layer, int32_t staging) const {
  assert(layer >= 0 && layer < shape_.num_layers);
  assert(staging >= 0 && staging < shape_.num_staging_blocks);
  return layer_bytes(shape_) * layer + blocks_bytes(shape_) + shape_.half_staging_bytes() * staging;
}

std::span<uint8_t> KvCacheStorage::staging_keys(int32_t layer, int32_t staging) {
  return k_.span().subspan(staging_offset(layer, staging), shape_.half_staging_bytes());
}

std::span<uint8_t> KvCacheStorage::staging_values(int32_t layer, int32_t staging) {
  return v_.span().subspan(staging_offset(layer, staging), shape_.half_staging_bytes());
}

std::span<const uint8_t> KvCacheStorage::staging_keys(int32_t layer, int32_t staging) const {
  return k_.span().subspan(staging_offset(layer, staging), shape_.half_staging_bytes());
}

std::span<const uint8_t> KvCacheStorage::staging_values(int32_t layer, int32_t staging) const {
  return v_.span().subspan(staging_offset(layer, staging), shape_.half_staging_bytes());
}

void KvCacheStorage::copy_staging(int32_t src_staging, int32_t dst_staging) {
  if (src_staging == dst_staging) return;
  for (int32_t layer = 0; layer < shape_.num_layers; ++layer) {
    std::ranges::copy(staging_keys(layer, src_staging), staging_keys(layer, dst_staging).begin());
    std::ranges::copy(staging_values(layer, src_staging), staging_values(layer, dst_staging).begin());
  }
}

size_t KvCacheStorage::block_offset(int32_t layer, int32_t block) const {
  assert(layer >= 0 && layer < shape_.num_layers);
  assert(block >= 0 && block < shape_.num_blocks + shape_.num_overlay_blocks());
  return layer_bytes(shape_) * layer + shape_.half_block_bytes() * block;
}

std::span<uint8_t> KvCacheStorage::block_keys(int32_t layer, int32_t block) {
  return k_.span().subspan(block_offset(layer, block), shape_.half_block_bytes());
}

std::span<uint8_t> KvCacheStorage::block_values(int32_t layer, int32_t block) {
  return v_.span().subspan(block_offset(layer, block), shape_.half_block_bytes());
}

std::span<const uint8_t> KvCacheStorage::block_keys(int32_t layer, int32_t block) const {
  return k_.span().subspan(block_offset(layer, block), shape_.half_block_bytes());
}

std::span<const uint8_t> KvCacheStorage::block_values(int32_t layer, int32_t block) const {
  return v_.span().subspan(block_offset(layer, block), shape_.half_block_bytes());
}

void KvCacheStorage::copy_block(int32_t src_block, int32_t dst_block) {
  if (src_block == dst_block) return;
  for (int32_t layer = 0; layer < shape_.num_layers; ++layer) {
    std::ranges::copy(block_keys(layer, src_block), block_keys(layer, dst_block).begin());
    std::ranges::copy(block_values(layer, src_block), block_values(layer, dst_block).begin());
  }
}

}  // namespace folio
