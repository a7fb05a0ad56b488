#include "kv/kv_cache_storage.h"

#include <algorithm>
#include <cassert>

namespace folio {

namespace {
size_t block_elems(const KvCacheShape& s) {
  return static_cast<size_t>(s.block_size) * s.num_kv_heads * s.head_dim;
}
size_t layer_elems(const KvCacheShape& s) {
  return block_elems(s) * s.num_blocks;
}
}  // namespace

KvCacheStorage::KvCacheStorage(const KvCacheShape& shape)
    : shape_(shape), k_(layer_elems(shape) * shape.num_layers), v_(layer_elems(shape) * shape.num_layers) {}

KvLayerView KvCacheStorage::layer(int32_t index) {
  assert(index >= 0 && index < shape_.num_layers);
  const size_t offset = layer_elems(shape_) * index;
  return KvLayerView{k_.data() + offset, v_.data() + offset,  shape_.num_blocks,
                     shape_.block_size,  shape_.num_kv_heads, shape_.head_dim};
}

size_t KvCacheStorage::block_offset(int32_t layer, int32_t block) const {
  assert(layer >= 0 && layer < shape_.num_layers);
  assert(block >= 0 && block < shape_.num_blocks);
  return layer_elems(shape_) * layer + block_elems(shape_) * block;
}

std::span<uint16_t> KvCacheStorage::block_keys(int32_t layer, int32_t block) {
  return std::span<uint16_t>(k_).subspan(block_offset(layer, block), block_elems(shape_));
}

std::span<uint16_t> KvCacheStorage::block_values(int32_t layer, int32_t block) {
  return std::span<uint16_t>(v_).subspan(block_offset(layer, block), block_elems(shape_));
}

std::span<const uint16_t> KvCacheStorage::block_keys(int32_t layer, int32_t block) const {
  return std::span<const uint16_t>(k_).subspan(block_offset(layer, block), block_elems(shape_));
}

std::span<const uint16_t> KvCacheStorage::block_values(int32_t layer, int32_t block) const {
  return std::span<const uint16_t>(v_).subspan(block_offset(layer, block), block_elems(shape_));
}

void KvCacheStorage::copy_block(int32_t src_block, int32_t dst_block) {
  if (src_block == dst_block) return;
  for (int32_t layer = 0; layer < shape_.num_layers; ++layer) {
    std::ranges::copy(block_keys(layer, src_block), block_keys(layer, dst_block).begin());
    std::ranges::copy(block_values(layer, src_block), block_values(layer, dst_block).begin());
  }
}

}  // namespace folio
