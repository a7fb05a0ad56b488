#include "kv/kv_cache_storage.h"

#include <cassert>

namespace folio {

namespace {
size_t layer_elems(const KvCacheShape& s) {
  return static_cast<size_t>(s.num_blocks) * s.block_size * s.num_kv_heads * s.head_dim;
}
}  // namespace

KvCacheStorage::KvCacheStorage(const KvCacheShape& shape)
    : shape_(shape),
      k_(layer_elems(shape) * shape.num_layers),
      v_(layer_elems(shape) * shape.num_layers) {}

KvLayerView KvCacheStorage::layer(int32_t index) {
  assert(index >= 0 && index < shape_.num_layers);
  const size_t offset = layer_elems(shape_) * index;
  return KvLayerView{k_.data() + offset, v_.data() + offset, shape_.num_blocks,
                     shape_.block_size, shape_.num_kv_heads, shape_.head_dim};
}

}  // namespace folio
