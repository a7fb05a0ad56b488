// One layer of the paged KV cache as kernels see it: plain pointers and sizes, no ownership.
// The memory behind it is the executor's (kv_cache_storage.h on the CPU, a device allocation on
// a GPU); which block belongs to which sequence is the block tables' business.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kv/kv_format.h"

namespace folio {

// k and v each point at num_blocks blocks of block_bytes() bytes in kv_format.h's layout. In
// fp16 a slot index (b * block_size + s) therefore addresses one token's K (or V) for all heads
// at k + slot * num_kv_heads * head_dim halves, as before formats existed; the quantized formats
// keep the values of (slot, head) at value_offset() and its scale at scale_offset().
struct KvLayerView {
  uint8_t* k = nullptr;
  uint8_t* v = nullptr;
  int32_t num_blocks = 0;
  int32_t block_size = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  KvFormat format = KvFormat::kFp16;
  // Residual formats only (kv_format_has_residual): num_staging fp16 blocks laid out as an fp16
  // cache's blocks ([block_size][num_kv_heads][head_dim] halves each), where an unsealed block's
  // tokens live until the block fills and is quantized into its own bytes. Which staging block
  // belongs to which block is the KV manager's business (AttentionSequence::staging).
  uint16_t* staging_k = nullptr;
  uint16_t* staging_v = nullptr;
  int32_t num_staging = 0;

  FOLIO_KV_HD size_t block_bytes() const { return kv_block_bytes(format, block_size, num_kv_heads, head_dim); }

  // Byte offset of the first value of (slot, head) from k (or v).
  FOLIO_KV_HD size_t value_offset(int64_t slot, int32_t head) const {
    return value_offset(static_cast<int32_t>(slot / block_size), static_cast<int32_t>(slot % block_size), head);
  }
  // Byte offset of the float scale of (slot, head) (quantized formats only).
  FOLIO_KV_HD size_t scale_offset(int64_t slot, int32_t head) const {
    return scale_offset(static_cast<int32_t>(slot / block_size), static_cast<int32_t>(slot % block_size), head);
  }
  // The same from (block, offset in block): kernels that walk block tables have both, and
  // skip the 64-bit division (a long instruction sequence on a GPU).
  FOLIO_KV_HD size_t value_offset(int32_t block, int32_t in_block, int32_t head) const {
    return static_cast<size_t>(block) * block_bytes() +
           (static_cast<size_t>(in_block) * num_kv_heads + head) * head_dim * kv_format_value_bytes(format);
  }
  // Scales are [num_kv_heads][block_size] after the values: a head's consecutive tokens sit in
  // consecutive floats, so a GPU warp reading 16 keys of one head takes its scales in one 64-byte
  // piece (with [block_size][num_kv_heads] they were 16 scattered floats, a 32-byte sector each).
  FOLIO_KV_HD size_t scale_offset(int32_t block, int32_t in_block, int32_t head) const {
    return static_cast<size_t>(block) * block_bytes() + static_cast<size_t>(block_size) * num_kv_heads * head_dim +
           (static_cast<size_t>(head) * block_size + in_block) * sizeof(float);
  }
  // KIVI keys: byte offset of (block, head, token group g): codes [head_dim][32 tokens], then
  // scale [head_dim] and minimum [head_dim] fp16.
  FOLIO_KV_HD size_t kivi_key_group_offset(int32_t block, int32_t head, int32_t group) const {
    const size_t group_bytes = static_cast<size_t>(head_dim) * (kKiviGroup * kivi_bits(format) / 8 + 4);
    return static_cast<size_t>(block) * block_bytes() +
           (static_cast<size_t>(head) * (block_size / kKiviGroup) + group) * group_bytes;
  }
  // KIVI values: byte offset of the row (block, in_block, head): codes [head_dim] packed, then
  // scale [head_dim / 32] and minimum [head_dim / 32] fp16.
  FOLIO_KV_HD size_t kivi_value_row_offset(int32_t block, int32_t in_block, int32_t head) const {
    return static_cast<size_t>(block) * block_bytes() +
           (static_cast<size_t>(in_block) * num_kv_heads + head) * kv_row_bytes(format, head_dim);
  }
  // The fp16 row (staging block, offset in it, head) of K (which = 0) or V (which = 1).
  FOLIO_KV_HD uint16_t* staging_row(int which, int32_t staging, int32_t in_block, int32_t head) const {
    return (which == 0 ? staging_k : staging_v) +
           ((static_cast<size_t>(staging) * block_size + in_block) * num_kv_heads + head) * head_dim;
  }
  // fp16 only: the halves of K (or V) of one token, all heads.
  FOLIO_KV_HD uint16_t* fp16_keys() const { return reinterpret_cast<uint16_t*>(k); }
  FOLIO_KV_HD uint16_t* fp16_values() const { return reinterpret_cast<uint16_t*>(v); }
};

}  // namespace folio
