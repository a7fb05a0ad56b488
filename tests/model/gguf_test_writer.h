// Builds GGUF files in memory for tests (and the fuzzer's seed corpus): tiny model files,
// and broken ones. Values are encoded as GGUF does (little-endian, u64 string lengths).
//
//   GgufTestWriter writer;
//   writer.add_u32("llama.block_count", 2).add_string("general.architecture", "llama");
//   writer.add_tensor("token_embd.weight", {64, 10}, DType::F32, float_bytes);
//   std::vector<uint8_t> bytes = writer.build();
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace folio::gguf_test {

// Little-endian byte sink; also used on its own to encode raw values (nested arrays, broken
// fields) for GgufTestWriter::add_raw.
class ByteWriter {
 public:
  ByteWriter& u8(uint8_t v) { return put(v); }
  ByteWriter& i8(int8_t v) { return put(v); }
  ByteWriter& u16(uint16_t v) { return put(v); }
  ByteWriter& i16(int16_t v) { return put(v); }
  ByteWriter& u32(uint32_t v) { return put(v); }
  ByteWriter& i32(int32_t v) { return put(v); }
  ByteWriter& u64(uint64_t v) { return put(v); }
  ByteWriter& i64(int64_t v) { return put(v); }
  ByteWriter& f32(float v) { return put(v); }
  ByteWriter& f64(double v) { return put(v); }
  ByteWriter& str(std::string_view s) {
    u64(s.size());
    return raw(s.data(), s.size());
  }
  ByteWriter& raw(const void* data, size_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + size);
    return *this;
  }
  ByteWriter& raw(const std::vector<uint8_t>& data) { return raw(data.data(), data.size()); }
  ByteWriter& pad_to(uint64_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back(0);
    return *this;
  }
  size_t size() const { return bytes_.size(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  template <typename T>
  ByteWriter& put(T v) {  // hosts are little-endian, as GGUF is
    return raw(&v, sizeof v);
  }
  std::vector<uint8_t> bytes_;
};

// GGUF value type ids (GgufValueType's values), spelled here so the writer needs no reader.
namespace gguf_type {
inline constexpr uint32_t kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6,
                          kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12;
}

class GgufTestWriter {
 public:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;      // GGUF order: dims[0] is the row
    uint32_t type_id = 0;            // a ggml type id (DType's value), or a bogus one
    std::vector<uint8_t> data;       // written at the tensor's offset in the data section
    std::optional<uint64_t> offset;  // overrides the computed (aligned) offset
  };

  explicit GgufTestWriter(uint32_t version = 3) : version_(version) {}

  // Scalars.
  GgufTestWriter& add_u8(std::string_view key, uint8_t v) { return scalar(key, gguf_type::kUint8, ByteWriter().u8(v)); }
  GgufTestWriter& add_i8(std::string_view key, int8_t v) { return scalar(key, gguf_type::kInt8, ByteWriter().i8(v)); }
  GgufTestWriter& add_u16(std::string_view key, uint16_t v) {
    return scalar(key, gguf_type::kUint16, ByteWriter().u16(v));
  }
  GgufTestWriter& add_i16(std::string_view key, int16_t v) {
    return scalar(key, gguf_type::kInt16, ByteWriter().i16(v));
  }
  GgufTestWriter& add_u32(std::string_view key, uint32_t v) {
    return scalar(key, gguf_type::kUint32, ByteWriter().u32(v));
  }
  GgufTestWriter& add_i32(std::string_view key, int32_t v) {
    return scalar(key, gguf_type::kInt32, ByteWriter().i32(v));
  }
  GgufTestWriter& add_u64(std::string_view key, uint64_t v) {
    return scalar(key, gguf_type::kUint64, ByteWriter().u64(v));
  }
  GgufTestWriter& add_i64(std::string_view key, int64_t v) {
    return scalar(key, gguf_type::kInt64, ByteWriter().i64(v));
  }
  GgufTestWriter& add_f32(std::string_view key, float v) {
    return scalar(key, gguf_type::kFloat32, ByteWriter().f32(v));
  }
  GgufTestWriter& add_f64(std::string_view key, double v) {
    return scalar(key, gguf_type::kFloat64, ByteWriter().f64(v));
  }
  GgufTestWriter& add_bool(std::string_view key, bool v) {
    return scalar(key, gguf_type::kBool, ByteWriter().u8(v ? 1 : 0));
  }
  GgufTestWriter& add_string(std::string_view key, std::string_view v) {
    return scalar(key, gguf_type::kString, ByteWriter().str(v));
  }

  // Arrays of one element kind.
  GgufTestWriter& add_string_array(std::string_view key, const std::vector<std::string>& items) {
    ByteWriter value;
    value.u32(gguf_type::kString).u64(items.size());
    for (const std::string& item : items) value.str(item);
    return scalar(key, gguf_type::kArray, value);
  }
  GgufTestWriter& add_f32_array(std::string_view key, const std::vector<float>& items) {
    ByteWriter value;
    value.u32(gguf_type::kFloat32).u64(items.size());
    for (float item : items) value.f32(item);
    return scalar(key, gguf_type::kArray, value);
  }
  GgufTestWriter& add_i32_array(std::string_view key, const std::vector<int32_t>& items) {
    ByteWriter value;
    value.u32(gguf_type::kInt32).u64(items.size());
    for (int32_t item : items) value.i32(item);
    return scalar(key, gguf_type::kArray, value);
  }

  // Any key with a raw type id and pre-encoded value bytes (nested arrays, unknown types).
  GgufTestWriter& add_raw(std::string_view key, uint32_t type_id, const ByteWriter& value) {
    return scalar(key, type_id, value);
  }

  // general.alignment as a u32; also used to lay out the tensor data, so it must be a power of
  // two here (write a bad one with add_u32("general.alignment", ...)).
  GgufTestWriter& set_alignment(uint32_t alignment) {
    alignment_ = alignment;
    return add_u32("general.alignment", alignment);
  }

  // A tensor of a known type. Without data, it is filled with a pattern of the right size.
  GgufTestWriter& add_tensor(std::string_view name, std::vector<uint64_t> dims, DType type,
                             std::optional<std::vector<uint8_t>> data = std::nullopt) {
    Tensor tensor{std::string(name), std::move(dims), static_cast<uint32_t>(type), {}, {}};
    if (data) {
      tensor.data = std::move(*data);
    } else {
      const DTypeInfo& info = dtype_info(type);
      uint64_t elements = 1;
      for (uint64_t d : tensor.dims) elements *= d;
      tensor.data.resize(elements / static_cast<uint64_t>(info.block_elems) * info.block_bytes);
      for (size_t i = 0; i < tensor.data.size(); ++i) {
        tensor.data[i] = static_cast<uint8_t>(i * 7 + tensors_.size() * 31 + 1);
      }
    }
    tensors_.push_back(std::move(tensor));
    return *this;
  }
  GgufTestWriter& add_tensor(Tensor tensor) {
    tensors_.push_back(std::move(tensor));
    return *this;
  }

  // Header counts that lie (for huge-count tests).
  GgufTestWriter& override_tensor_count(uint64_t count) {
    tensor_count_ = count;
    return *this;
  }
  GgufTestWriter& override_metadata_count(uint64_t count) {
    metadata_count_ = count;
    return *this;
  }

  std::vector<Tensor>& tensors() { return tensors_; }
  uint64_t alignment() const { return alignment_; }

  // Offset of each tensor's data from the start of the data section, as build() lays it out.
  std::vector<uint64_t> tensor_offsets() const {
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (const Tensor& tensor : tensors_) {
      next = (next + alignment_ - 1) / alignment_ * alignment_;
      offsets.push_back(tensor.offset.value_or(next));
      next += tensor.data.size();
    }
    return offsets;
  }

  std::vector<uint8_t> build() const {
    ByteWriter out;
    out.raw("GGUF", 4).u32(version_);
    out.u64(tensor_count_.value_or(tensors_.size()));
    out.u64(metadata_count_.value_or(metadata_count_written_));
    out.raw(metadata_.bytes());
    const std::vector<uint64_t> offsets = tensor_offsets();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const Tensor& tensor = tensors_[i];
      out.str(tensor.name).u32(static_cast<uint32_t>(tensor.dims.size()));
      for (uint64_t d : tensor.dims) out.u64(d);
      out.u32(tensor.type_id).u64(offsets[i]);
    }
    if (tensors_.empty()) return out.take();
    out.pad_to(alignment_);
    std::vector<uint8_t> bytes = out.take();
    const size_t data_start = bytes.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      // Gaps (from overridden offsets) are zeros; an offset pointing back overlaps earlier data.
      const std::vector<uint8_t>& data = tensors_[i].data;
      if (data.empty()) continue;  // lets a test point an offset far past the end cheaply
      const size_t begin = data_start + offsets[i];
      if (bytes.size() < begin + data.size()) bytes.resize(begin + data.size(), 0);
      std::memcpy(bytes.data() + begin, data.data(), data.size());
    }
    return bytes;
  }

 private:
  GgufTestWriter& scalar(std::string_view key, uint32_t type_id, const ByteWriter& value) {
    metadata_.str(key).u32(type_id).raw(value.bytes());
    ++metadata_count_written_;
    return *this;
  }

  uint32_t version_;
  uint64_t alignment_ = 32;
  ByteWriter metadata_;
  uint64_t metadata_count_written_ = 0;
  std::optional<uint64_t> tensor_count_;
  std::optional<uint64_t> metadata_count_;
  std::vector<Tensor> tensors_;
};

}  // namespace folio::gguf_test
