// The memory behind the paged KV cache: for every layer, num_blocks blocks of block_size
// token slots, each slot holding K and V for all KV heads in the cache's format (kv_format.h).
// Which block belongs to which sequence is not known here: that is the block tables' job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/zeroed_array.h"
#include "kv/kv_format.h"
#include "kv/kv_layer_view.h"

namespace folio {

struct KvCacheShape {
  int32_t num_layers = 0;
  int32_t num_blocks = 0;
  int32_t block_size = 16;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  KvFormat format = KvFormat::kFp16;

  // One layer's K (or V) of one block.
  size_t half_block_bytes() const { return kv_block_bytes(format, block_size, num_kv_heads, head_dim); }
  size_t bytes_per_block() const { return 2ull * num_layers * half_block_bytes(); }  // K and V, all layers
};

class KvCacheStorage {
 public:
  explicit KvCacheStorage(const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }
  KvLayerView layer(int32_t index);
  size_t bytes() const { return k_.size() + v_.size(); }

  // One layer's K (or V) of one block: half_block_bytes() bytes in the format's layout.
  std::span<uint8_t> block_keys(int32_t layer, int32_t block);
  std::span<uint8_t> block_values(int32_t layer, int32_t block);
  std::span<const uint8_t> block_keys(int32_t layer, int32_t block) const;
  std::span<const uint8_t> block_values(int32_t layer, int32_t block) const;

  // Copies block src's K and V, every layer, into block dst: copy-on-write of a shared block.
  void copy_block(int32_t src_block, int32_t dst_block);

 private:
  size_t block_offset(int32_t layer, int32_t block) const;

  KvCacheShape shape_;
  ZeroedArray<uint8_t> k_;  // (num_layers, num_blocks, half_block_bytes)
  ZeroedArray<uint8_t> v_;  // (num_layers, num_blocks, half_block_bytes)
};

}  // namespace folio
