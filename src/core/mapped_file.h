// A whole file mapped read-only into memory (mmap), unmapped when the object goes: how model
// files are read, so that weights can be used in place and pages come in as they are touched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/status.h"

namespace folio {

class MappedFile {
 public:
  // what: the prefix of error messages ("gguf", "safetensors"); an empty file is an error.
  static Expected<MappedFile> open(const std::string& path, const char* what);

  MappedFile(MappedFile&&) noexcept;
  MappedFile& operator=(MappedFile&&) noexcept;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return {static_cast<const uint8_t*>(address_), size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  void* address_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace folio
