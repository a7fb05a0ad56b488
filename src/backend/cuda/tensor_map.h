// Tensor maps: the descriptors Hopper's bulk tensor copies (cp.async.bulk.tensor, "TMA") read to
// move a box of a global tensor into shared memory, swizzled as wgmma reads it, with no thread
// computing an address. They are encoded on the host by the driver (cuTensorMapEncodeTiled,
// reached through the runtime's entry-point query, so folio links no libcuda) and passed to a
// kernel by value as a __grid_constant__ parameter.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace folio::cuda {

// A paged fp16 cache's rows as a 3-D tensor (head_dim, num_kv_heads, slots), slot s of head h
// at (s * num_kv_heads + h) * head_dim, read in boxes of (box_dim, 1 head, box_rows slots)
// with the 128-byte swizzle (box_dim * 2 <= 128 bytes). False (map untouched) where the
// driver has no encoder or rejects the shape.
bool encode_paged_rows_map(CUtensorMap* map, const void* base, int64_t slots, int32_t num_kv_heads, int32_t head_dim,
                           int32_t box_dim, int32_t box_rows);

}  // namespace folio::cuda
