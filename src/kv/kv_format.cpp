#include "kv/kv_format.h"

namespace folio {

std::string_view kv_format_name(KvFormat f) {
  switch (f) {
    case KvFormat::kFp16: return "fp16";
    case KvFormat::kFp8E4M3: return "fp8";
    case KvFormat::kInt8: return "int8";
  }
  return "?";
}

std::optional<KvFormat> parse_kv_format(std::string_view name, std::string* error) {
  if (name == "auto" || name == "fp16") return KvFormat::kFp16;
  if (name == "fp8" || name == "fp8_e4m3") return KvFormat::kFp8E4M3;
  if (name == "int8") return KvFormat::kInt8;
  if (error != nullptr) {
    *error = "unknown --kv-cache-dtype '" + std::string(name) + "' (known: auto, fp16, fp8, fp8_e4m3, int8)";
    if (name == "bf16" || name == "kivi4" || name == "kivi2") {
      *error = "--kv-cache-dtype " + std::string(name) + " is not implemented yet (known: auto, fp16, fp8, int8)";
    }
  }
  return std::nullopt;
}

}  // namespace folio
