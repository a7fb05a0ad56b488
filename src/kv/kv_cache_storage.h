// The memory behind the paged KV cache: for every layer, num_blocks blocks of block_size
// token slots, each slot holding K and V for all KV heads in the cache's format (kv_format.h).
// Which block belongs to which sequence is not known here: that is the block tables' job.
// A residual format's staging blocks follow each layer's blocks, so that block ids past
// num_blocks address their bytes (num_overlay_blocks; block_pool.h decides when that is safe).
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
  int32_t num_staging_blocks = 0;  // residual formats: fp16 blocks for unsealed tokens

  // One layer's K (or V) of one block.
  size_t half_block_bytes() const { return kv_block_bytes(format, block_size, num_kv_heads, head_dim); }
  size_t bytes_per_block() const { return 2ull * num_layers * half_block_bytes(); }  // K and V, all layers
  // One layer's K (or V) of one staging block, and K and V of all layers.
  size_t half_staging_bytes() const { return kv_block_bytes(KvFormat::kFp16, block_size, num_kv_heads, head_dim); }
  size_t bytes_per_staging_block() const { return 2ull * num_layers * half_staging_bytes(); }
  // Block ids past num_blocks whose bytes lie in the staging blocks' (each layer's K, and V, is
  // [num_blocks blocks][num_staging_blocks staging blocks]): what a pool may overlay on them.
  int32_t num_overlay_blocks() const {
    return num_staging_blocks == 0
               ? 0
               : static_cast<int32_t>(half_staging_bytes() * num_staging_blocks / half_block_bytes());
  }
};

class KvCacheStorage {
 public:
  explicit KvCacheStorage(const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }
  KvLayerView layer(int32_t index);
  size_t bytes() const { return k_.size() + v_.size(); }

  // One layer's K (or V) of one block: half_block_bytes() bytes in the format's layout. Blocks
  // num_blocks .. num_blocks + num_overlay_blocks() - 1 are the overlay ids.
  std::span<uint8_t> block_keys(int32_t layer, int32_t block);
  std::span<uint8_t> block_values(int32_t layer, int32_t block);
  std::span<const uint8_t> block_keys(int32_t layer, int32_t block) const;
  std::span<const uint8_t> block_values(int32_t layer, int32_t block) const;

  // One layer's K (or V) of one staging block (fp16, residual formats only).
  std::span<uint8_t> staging_keys(int32_t layer, int32_t staging);
  std::span<uint8_t> staging_values(int32_t layer, int32_t staging);
  std::span<const uint8_t> staging_keys(int32_t layer, int32_t staging) const;
  std::span<const uint8_t> staging_values(int32_t layer, int32_t staging) const;

  // Copies block src's K and V, every layer, into block dst: copy-on-write of a shared block.
  void copy_block(int32_t src_block, int32_t dst_block);
  // The same for staging blocks: copy-on-write of a shared unsealed block.
  void copy_staging(int32_t src_staging, int32_t dst_staging);

 private:
  size_t block_offset(int32_t layer, int32_t block) const;
  size_t staging_offset(int32_t layer, int32_t staging) const;

  KvCacheShape shape_;
  // (num_layers, layer bytes): a layer is num_blocks blocks of half_block_bytes, then
  // num_staging_blocks staging blocks of half_staging_bytes.
  ZeroedArray<uint8_t> k_;
  ZeroedArray<uint8_t> v_;
};

}  // namespace folio
