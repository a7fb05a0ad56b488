#include "kv/kv_format.h"

namespace folio {

std::string_view kv_format_name(KvFormat f) {
  switch (f) {
    case KvFormat::kFp16: return "fp16";
    case KvFormat::kFp8E4M3: return "fp8";
    case KvFormat::kInt8: return "int8";
    case KvFormat::kKivi4: return "kivi4";
    case KvFormat::kKivi2: return "kivi2";
    case KvFormat::kBf16: return "bf16";
  }
  return "?";
}

std::optional<KvFormat> parse_kv_format(std::string_view name, std::string* error) {
  if (name == "auto" || name == "fp16") return KvFormat::kFp16;
  if (name == "fp8" || name == "fp8_e4m3") return KvFormat::kFp8E4M3;
  if (name == "int8") return KvFormat::kInt8;
  if (name == "kivi4") return KvFormat::kKivi4;
  if (name == "kivi2") return KvFormat::kKivi2;
  if (name == "bf16") return KvFormat::kBf16;
  if (error != nullptr) {
    *error = "unknown --kv-cache-dtype '" + std::string(name) +
             "' (known: auto, fp16, bf16, fp8, fp8_e4m3, int8, kivi4, kivi2)";
  }
  return std::nullopt;
}

int32_t kv_default_block_size(KvFormat f) {
  return kv_format_has_residual(f) ? 128 : 16;
}

std::string kv_format_shape_error(KvFormat f, int32_t block_size, int32_t head_dim) {
  if (f == KvFormat::kFp8E4M3 && block_size % 16 != 0) {
    return "--kv-cache-dtype fp8 needs a block size that is a multiple of 16 (the block is its fp16 residual "
           "window; got " +
           std::to_string(block_size) + ")";
  }
  if (!kv_format_is_kivi(f)) return {};
  if (block_size % kKiviGroup != 0) {
    return "--kv-cache-dtype " + std::string(kv_format_name(f)) + " needs a block size that is a multiple of " +
           std::to_string(kKiviGroup) + " (the block is KIVI's residual window; got " + std::to_string(block_size) +
           ")";
  }
  if (head_dim % kKiviGroup != 0) {
    return "--kv-cache-dtype " + std::string(kv_format_name(f)) + " needs a head size that is a multiple of " +
           std::to_string(kKiviGroup) + " (this model's is " + std::to_string(head_dim) + ")";
  }
  return {};
}

}  // namespace folio
