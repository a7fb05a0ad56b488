// The memory behind the paged KV cache: for every layer, num_blocks blocks of block_size
// token slots, each slot holding K and V for all KV heads. Which block belongs to which
// sequence is not known here: that is the block tables' job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_layer_view.h"

namespace folio {

struct KvCacheShape {
  int32_t num_layers = 0;
  int32_t num_blocks = 0;
  int32_t block_size = 16;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;

  size_t bytes_per_block() const {  // K and V, all layers
    return 2ull * num_layers * block_size * num_kv_heads * head_dim * sizeof(uint16_t);
  }
};

class KvCacheStorage {
 public:
  explicit KvCacheStorage(const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }
  KvLayerView layer(int32_t index);
  size_t bytes() const { return (k_.size() + v_.size()) * sizeof(uint16_t); }

  // One layer's K (or V) of one block: (block_size, num_kv_heads, head_dim) fp16 bits.
  std::span<uint16_t> block_keys(int32_t layer, int32_t block);
  std::span<uint16_t> block_values(int32_t layer, int32_t block);
  std::span<const uint16_t> block_keys(int32_t layer, int32_t block) const;
  std::span<const uint16_t> block_values(int32_t layer, int32_t block) const;

  // Copies block src's K and V, every layer, into block dst: copy-on-write of a shared block.
  void copy_block(int32_t src_block, int32_t dst_block);

 private:
  size_t block_offset(int32_t layer, int32_t block) const;

  KvCacheShape shape_;
  std::vector<uint16_t> k_;  // (num_layers, num_blocks, block_size, num_kv_heads, head_dim) fp16
  std::vector<uint16_t> v_;  // (num_layers, num_blocks, block_size, num_kv_heads, head_dim) fp16
};

}  // namespace folio
