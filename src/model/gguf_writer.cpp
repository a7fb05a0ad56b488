#include "model/gguf_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace folio {
namespace {

// GGUF value type ids.
constexpr uint32_t kTypeUint32 = 4, kTypeInt32 = 5, kTypeFloat32 = 6, kTypeBool = 7, kTypeString = 8, kTypeArray = 9;

// Chunks of about this many bytes are filled and written at a time: large enough for fast I/O,
// small enough that the writer's memory stays flat.
constexpr uint64_t kChunkBytes = uint64_t{64} << 20;

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

void GgufWriter::put(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  metadata_.insert(metadata_.end(), p, p + size);
}

void GgufWriter::put_string(std::string_view s) {
  const uint64_t size = s.size();
  put(&size, sizeof size);
  put(s.data(), s.size());
}

void GgufWriter::key(std::string_view name, uint32_t type_id) {
  put_string(name);
  put(&type_id, sizeof type_id);
  ++metadata_count_;
}

GgufWriter& GgufWriter::add_u32(std::string_view name, uint32_t value) {
  key(name, kTypeUint32);
  put(&value, sizeof value);
  return *this;
}

GgufWriter& GgufWriter::add_f32(std::string_view name, float value) {
  key(name, kTypeFloat32);
  put(&value, sizeof value);
  return *this;
}

GgufWriter& GgufWriter::add_bool(std::string_view name, bool value) {
  key(name, kTypeBool);
  const uint8_t byte = value ? 1 : 0;
  put(&byte, 1);
  return *this;
}

GgufWriter& GgufWriter::add_string(std::string_view name, std::string_view value) {
  key(name, kTypeString);
  put_string(value);
  return *this;
}

GgufWriter& GgufWriter::add_string_array(std::string_view name, const std::vector<std::string>& items) {
  key(name, kTypeArray);
  const uint32_t element = kTypeString;
  const uint64_t count = items.size();
  put(&element, sizeof element);
  put(&count, sizeof count);
  for (const std::string& item : items) put_string(item);
  return *this;
}

GgufWriter& GgufWriter::add_i32_array(std::string_view name, const std::vector<int32_t>& items) {
  key(name, kTypeArray);
  const uint32_t element = kTypeInt32;
  const uint64_t count = items.size();
  put(&element, sizeof element);
  put(&count, sizeof count);
  put(items.data(), items.size() * sizeof(int32_t));
  return *this;
}

void GgufWriter::put_payload(const GgufValue& value) {
  auto put_as = [&](auto v) { put(&v, sizeof v); };
  switch (value.type) {
    case GgufValueType::UINT8: put_as(static_cast<uint8_t>(std::get<uint64_t>(value.data))); break;
    case GgufValueType::INT8: put_as(static_cast<int8_t>(std::get<int64_t>(value.data))); break;
    case GgufValueType::UINT16: put_as(static_cast<uint16_t>(std::get<uint64_t>(value.data))); break;
    case GgufValueType::INT16: put_as(static_cast<int16_t>(std::get<int64_t>(value.data))); break;
    case GgufValueType::UINT32: put_as(static_cast<uint32_t>(std::get<uint64_t>(value.data))); break;
    case GgufValueType::INT32: put_as(static_cast<int32_t>(std::get<int64_t>(value.data))); break;
    case GgufValueType::FLOAT32: put_as(static_cast<float>(std::get<double>(value.data))); break;
    case GgufValueType::BOOL: put_as(static_cast<uint8_t>(std::get<uint64_t>(value.data) != 0)); break;
    case GgufValueType::STRING: put_string(std::get<std::string>(value.data)); break;
    case GgufValueType::UINT64: put_as(std::get<uint64_t>(value.data)); break;
    case GgufValueType::INT64: put_as(std::get<int64_t>(value.data)); break;
    case GgufValueType::FLOAT64: put_as(std::get<double>(value.data)); break;
    case GgufValueType::ARRAY: {
      const GgufArray& array = std::get<GgufArray>(value.data);
      put_as(static_cast<uint32_t>(array.element_type));
      put_as(static_cast<uint64_t>(array.items.size()));
      for (const GgufValue& item : array.items) put_payload(item);
      break;
    }
  }
}

GgufWriter& GgufWriter::add_value(std::string_view name, const GgufValue& value) {
  key(name, static_cast<uint32_t>(value.type));
  put_payload(value);
  return *this;
}

GgufWriter& GgufWriter::add_tensor(std::string name, std::vector<uint64_t> dims, DType type, TensorFill fill) {
  Tensor t{std::move(name), std::move(dims), type, std::move(fill)};
  t.row_bytes = row_bytes(type, static_cast<int64_t>(t.dims[0]));
  uint64_t rows = 1;
  for (size_t i = 1; i < t.dims.size(); ++i) rows *= t.dims[i];
  t.bytes = t.row_bytes * rows;
  tensors_.push_back(std::move(t));
  return *this;
}

uint64_t GgufWriter::data_bytes() const {
  uint64_t total = 0;
  for (const Tensor& t : tensors_) total = (total + kAlignment - 1) / kAlignment * kAlignment + t.bytes;
  return total;
}

Status GgufWriter::write(const std::string& path, const std::function<void(uint64_t, uint64_t)>& progress) const {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "wb"));
  if (!file) return Status::error("cannot create '" + path + "': " + std::strerror(errno));
  std::vector<uint8_t> header;
  auto append = [&](const void* data, size_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    header.insert(header.end(), p, p + size);
  };
  const uint32_t version = 3;
  const uint64_t tensor_count = tensors_.size();
  append("GGUF", 4);
  append(&version, sizeof version);
  append(&tensor_count, sizeof tensor_count);
  append(&metadata_count_, sizeof metadata_count_);
  append(metadata_.data(), metadata_.size());
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    offset = (offset + kAlignment - 1) / kAlignment * kAlignment;
    const uint64_t name_size = t.name.size();
    const uint32_t n_dims = static_cast<uint32_t>(t.dims.size());
    const uint32_t type_id = static_cast<uint32_t>(t.type);
    append(&name_size, sizeof name_size);
    append(t.name.data(), t.name.size());
    append(&n_dims, sizeof n_dims);
    append(t.dims.data(), t.dims.size() * sizeof(uint64_t));
    append(&type_id, sizeof type_id);
    append(&offset, sizeof offset);
    offset += t.bytes;
  }
  header.resize((header.size() + kAlignment - 1) / kAlignment * kAlignment, 0);
  std::FILE* f = file.get();
  if (std::fwrite(header.data(), 1, header.size(), f) != header.size()) {
    return Status::error("writing '" + path + "' failed: " + std::strerror(errno));
  }

  const uint64_t total = data_bytes();
  uint64_t written = 0;
  std::vector<uint8_t> chunk;
  const uint8_t zeros[kAlignment] = {};
  for (const Tensor& t : tensors_) {
    const uint64_t pad = (written + kAlignment - 1) / kAlignment * kAlignment - written;
    if (pad != 0 && std::fwrite(zeros, 1, pad, f) != pad) {
      return Status::error("writing '" + path + "' failed: " + std::strerror(errno));
    }
    written += pad;
    const uint64_t rows_per_chunk = std::max<uint64_t>(1, kChunkBytes / t.row_bytes);
    for (uint64_t at = 0; at < t.bytes; at += rows_per_chunk * t.row_bytes) {
      const uint64_t size = std::min(t.bytes - at, rows_per_chunk * t.row_bytes);
      chunk.resize(size);
      t.fill(at, std::span<uint8_t>(chunk.data(), size));
      if (std::fwrite(chunk.data(), 1, size, f) != size) {
        return Status::error("writing '" + path + "' failed: " + std::strerror(errno));
      }
      written += size;
      if (progress) progress(written, total);
    }
  }
  if (std::fflush(f) != 0) return Status::error("writing '" + path + "' failed: " + std::strerror(errno));
  return Status::ok();
}

}  // namespace folio
