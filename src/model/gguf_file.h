// A GGUF file (versions 2 and 3): metadata key/values, tensor infos, and memory-mapped
// tensor data. Parsing validates every length, count, type and offset against the bytes
// actually present; a bad file yields a Status naming the field and its byte offset.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace folio {

enum class GgufValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

struct GgufValue;

struct GgufArray {
  GgufValueType element_type = GgufValueType::UINT8;
  std::vector<GgufValue> items;
};

struct GgufValue {
  GgufValueType type = GgufValueType::UINT8;
  // Unsigned integers and bool in uint64_t, signed in int64_t, floats in double.
  std::variant<uint64_t, int64_t, double, std::string, GgufArray> data;

  std::optional<int64_t> as_int() const;   // any integer type (uint64 above INT64_MAX: nullopt)
  std::optional<double> as_float() const;  // float or integer types
  std::optional<bool> as_bool() const;
  const std::string* as_string() const;
  const GgufArray* as_array() const;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // GGUF order: dims[0] is the contiguous (row) dimension
  DType type = DType::F32;
  uint64_t offset = 0;  // from the start of the tensor data section
  uint64_t num_elements = 0;
  uint64_t num_bytes = 0;
};

class GgufFile {
 public:
  // Maps the file read-only and parses it. The mapping lives as long as the GgufFile.
  static Expected<GgufFile> open(const std::string& path);
  // Parses bytes the caller keeps alive (used by tests and the fuzzer).
  static Expected<GgufFile> parse(std::span<const uint8_t> bytes);

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::string& path() const { return path_; }
  uint64_t file_size() const { return bytes_.size(); }

  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;
  // Forgets a metadata entry (find() is null for it afterwards), giving its memory back: a
  // 262k-token vocabulary's three arrays hold ~38 MB as parsed values, needed only until the
  // tokenizer is built.
  void release(std::string_view key);
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  // Arrays of the given element kind; nullopt if missing or of another element type.
  std::optional<std::vector<std::string>> get_string_array(std::string_view key) const;
  std::optional<std::vector<float>> get_float_array(std::string_view key) const;
  std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  // Start of a tensor's bytes (num_bytes of them, already checked to lie inside the file).
  const uint8_t* tensor_data(const GgufTensorInfo& info) const;

 private:
  GgufFile() = default;
  struct Mapping;
  std::unique_ptr<Mapping> mapping_;  // null when parsing caller-owned bytes
  std::span<const uint8_t> bytes_;
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;  // start of the tensor data section in bytes_
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace folio
