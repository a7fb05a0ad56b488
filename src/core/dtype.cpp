#include "core/dtype.h"

#include <array>
#include <cassert>

namespace folio {
namespace {

constexpr std::array<DTypeInfo, 15> kTypes = {{
    {DType::F32, "F32", 1, 4},
    {DType::F16, "F16", 1, 2},
    {DType::Q4_0, "Q4_0", 32, 2 + 16},
    {DType::Q4_1, "Q4_1", 32, 2 + 2 + 16},
    {DType::Q5_0, "Q5_0", 32, 2 + 4 + 16},
    {DType::Q5_1, "Q5_1", 32, 2 + 2 + 4 + 16},
    {DType::Q8_0, "Q8_0", 32, 2 + 32},
    {DType::Q8_1, "Q8_1", 32, 2 + 2 + 32},
    {DType::Q2_K, "Q2_K", 256, 16 + 64 + 2 + 2},
    {DType::Q3_K, "Q3_K", 256, 32 + 64 + 12 + 2},
    {DType::Q4_K, "Q4_K", 256, 2 + 2 + 12 + 128},
    {DType::Q5_K, "Q5_K", 256, 2 + 2 + 12 + 32 + 128},
    {DType::Q6_K, "Q6_K", 256, 128 + 64 + 16 + 2},
    {DType::Q8_K, "Q8_K", 256, 4 + 256 + 32},
    {DType::BF16, "BF16", 1, 2},
}};

}  // namespace

std::optional<DTypeInfo> dtype_info(uint32_t gguf_type_id) {
  for (const DTypeInfo& info : kTypes) {
    if (static_cast<uint32_t>(info.type) == gguf_type_id) return info;
  }
  return std::nullopt;
}

const DTypeInfo& dtype_info(DType type) {
  for (const DTypeInfo& info : kTypes) {
    if (info.type == type) return info;
  }
  assert(false && "unknown DType");
  return kTypes[0];
}

std::string_view dtype_name(DType type) {
  return dtype_info(type).name;
}

size_t row_bytes(DType type, int64_t elems) {
  const DTypeInfo& info = dtype_info(type);
  assert(elems % info.block_elems == 0);
  return static_cast<size_t>(elems / info.block_elems) * info.block_bytes;
}

}  // namespace folio
