// One layer of the paged KV cache as kernels see it: plain pointers and sizes, no ownership.
// The memory behind it is the executor's (kv_cache_storage.h on the CPU, a device allocation on
// a GPU); which block belongs to which sequence is the block tables' business.
#pragma once

#include <cstdint>

namespace folio {

// In fp16 (half the memory of fp32, and the precision llama.cpp and most engines keep K/V in).
// Block b, slot s, kv head h starts at
//   k + ((b * block_size + s) * num_kv_heads + h) * head_dim
// so a slot index (b * block_size + s) addresses one token's K (or V) for all heads.
struct KvLayerView {
  uint16_t* k = nullptr;  // (num_blocks, block_size, num_kv_heads, head_dim) fp16 bits
  uint16_t* v = nullptr;  // (num_blocks, block_size, num_kv_heads, head_dim) fp16 bits
  int32_t num_blocks = 0;
  int32_t block_size = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
};

}  // namespace folio
