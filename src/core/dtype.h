// Element types, including GGUF's block-quantized ones. The numeric values are GGUF's
// (ggml_type) so that a tensor's type id in a file maps straight onto DType.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace folio {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  BF16 = 30,
};

struct DTypeInfo {
  DType type;
  std::string_view name;
  int64_t block_elems;  // elements per block (1 for plain floats)
  size_t block_bytes;   // bytes per block
};

// Info for a GGUF type id, or nullopt for ids folio does not know (or cannot compute with).
std::optional<DTypeInfo> dtype_info(uint32_t gguf_type_id);
const DTypeInfo& dtype_info(DType type);
std::string_view dtype_name(DType type);

// Bytes of a row of `elems` elements; `elems` must be a multiple of the block size.
size_t row_bytes(DType type, int64_t elems);

}  // namespace folio
