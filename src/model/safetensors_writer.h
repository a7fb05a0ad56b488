// Writes a safetensors file: an 8-byte little-endian header length, the JSON header (every
// tensor's dtype, shape and byte range; metadata under "__metadata__"), padded with spaces to a
// multiple of 8, then the tensors' bytes in the order given. The reader is safetensors_file.h.
#pragma once

#include <cstdint>
#include <functional>
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

// A tensor made only when its turn to be written comes, so that a file larger than memory
// (a 70B model's) streams out one tensor at a time: make fills `bytes`, already sized.
struct SafetensorsStreamEntry {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  std::vector<int64_t> shape;
  std::function<void(std::span<uint8_t> bytes)> make;
};

// progress(bytes written, total bytes) after each tensor.
Status write_safetensors_streamed(const std::string& path, const std::vector<SafetensorsStreamEntry>& tensors,
                                  const std::function<void(uint64_t, uint64_t)>& progress = {},
                                  const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace folio
