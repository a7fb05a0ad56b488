// Writes a safetensors file: an 8-byte little-endian header length, the JSON header (every
// tensor's dtype, shape and byte range; metadata under "__metadata__"), padded with spaces to a
// multiple of 8, then the tensors' bytes in the order given. The reader is safetensors_file.h.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/safetensors_file.h"

namespace folio {

struct SafetensorsEntry {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  std::vector<int64_t> shape;
  std::span<const uint8_t> bytes;  // must outlive the write; its size must match dtype and shape
};

Status write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                         const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace folio
