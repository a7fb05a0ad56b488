// A safetensors file (Hugging Face's weight format): an 8-byte little-endian header length, a
// JSON header naming every tensor's dtype, shape and byte range, then the data. The file is
// memory-mapped and the header validated like the GGUF reader's: the header inside the file,
// known dtypes, shapes whose element count times the dtype's size equals the byte range (no
// overflow on the way), ranges inside the data and covering it without overlaps or holes
// (what the reference implementation demands, so that a file cannot hide other content),
// unique names. Every error names the tensor and the byte offset.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "core/status.h"

namespace folio {

enum class SafetensorsDtype {
  kBool,
  kU8,
  kI8,
  kU16,
  kI16,
  kU32,
  kI32,
  kU64,
  kI64,
  kF16,
  kBF16,
  kF32,
  kF64,
  kF8E4M3,
  kF8E5M2
};

struct SafetensorsTensor {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  std::vector<int64_t> shape;  // row-major, outermost first (PyTorch's order)
  uint64_t begin = 0;          // byte range inside the data section
  uint64_t end = 0;

  uint64_t num_bytes() const { return end - begin; }
  int64_t num_elements() const;
};

std::string_view safetensors_dtype_name(SafetensorsDtype dtype);
size_t safetensors_dtype_bytes(SafetensorsDtype dtype);

class SafetensorsFile {
 public:
  static Expected<SafetensorsFile> open(const std::string& path);
  // Parses bytes the caller keeps alive (tests, the fuzzer); name prefixes the errors.
  static Expected<SafetensorsFile> parse(std::span<const uint8_t> bytes, const std::string& name = "<memory>");

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(std::string_view name) const;
  // The tensor's bytes, inside the mapping.
  std::span<const uint8_t> data(const SafetensorsTensor& tensor) const;
  // The header's "__metadata__" (string to string), e.g. {"format": "pt"}.
  const std::map<std::string, std::string, std::less<>>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  std::shared_ptr<MappedFile> mapping_;  // null when parsing caller-owned bytes
  std::span<const uint8_t> data_;        // the data section
  std::string path_;
  std::vector<SafetensorsTensor> tensors_;  // in file order (by begin)
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string, std::less<>> metadata_;
};

}  // namespace folio
