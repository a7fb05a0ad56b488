#include "model/safetensors_file.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

namespace folio {
namespace {

using nlohmann::json;

// A header is at most this long (the reference implementation's limit is 100 MB).
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;

struct DtypeName {
  std::string_view name;
  SafetensorsDtype dtype;
  size_t bytes;
};
constexpr DtypeName kDtypes[] = {
    {"BOOL", SafetensorsDtype::kBool, 1},      {"U8", SafetensorsDtype::kU8, 1},
    {"I8", SafetensorsDtype::kI8, 1},          {"U16", SafetensorsDtype::kU16, 2},
    {"I16", SafetensorsDtype::kI16, 2},        {"U32", SafetensorsDtype::kU32, 4},
    {"I32", SafetensorsDtype::kI32, 4},        {"U64", SafetensorsDtype::kU64, 8},
    {"I64", SafetensorsDtype::kI64, 8},        {"F16", SafetensorsDtype::kF16, 2},
    {"BF16", SafetensorsDtype::kBF16, 2},      {"F32", SafetensorsDtype::kF32, 4},
    {"F64", SafetensorsDtype::kF64, 8},        {"F8_E4M3", SafetensorsDtype::kF8E4M3, 1},
    {"F8_E5M2", SafetensorsDtype::kF8E5M2, 1},
};

std::optional<SafetensorsDtype> dtype_from_name(std::string_view name) {
  for (const DtypeName& d : kDtypes) {
    if (d.name == name) return d.dtype;
  }
  return std::nullopt;
}

// Collects the header's top-level keys in order, so that a repeated name is caught (the JSON
// library keeps the last of duplicates silently).
class TopLevelKeys : public nlohmann::json_sax<json> {
 public:
  std::vector<std::string> keys;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    ++depth_;
    return true;
  }
  bool key(string_t& value) override {
    if (depth_ == 1) keys.push_back(value);
    return true;
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  int depth_ = 0;
};

}  // namespace

int64_t SafetensorsTensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // validated at parse time not to overflow
  return n;
}

std::string_view safetensors_dtype_name(SafetensorsDtype dtype) {
  for (const DtypeName& d : kDtypes) {
    if (d.dtype == dtype) return d.name;
  }
  return "?";
}

size_t safetensors_dtype_bytes(SafetensorsDtype dtype) {
  for (const DtypeName& d : kDtypes) {
    if (d.dtype == dtype) return d.bytes;
  }
  return 0;
}

Expected<SafetensorsFile> SafetensorsFile::parse(std::span<const uint8_t> bytes, const std::string& name) {
  const std::string where = "safetensors: " + name + ": ";
  if (bytes.size() < 8) {
    return Status::error(where + "the file has " + std::to_string(bytes.size()) +
                         " bytes, fewer than the 8-byte header length");
  }
  uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);  // little-endian, like the hosts folio runs on
  if (header_size > kMaxHeaderBytes || header_size > bytes.size() - 8) {
    return Status::error(where + "the header length " + std::to_string(header_size) +
                         " at byte 0 runs past the end of the " + std::to_string(bytes.size()) + "-byte file");
  }
  const auto* header_begin = reinterpret_cast<const char*>(bytes.data() + 8);
  const std::string_view header(header_begin, header_size);
  if (header.find('\0') != std::string_view::npos) {
    return Status::error(where + "the header holds a NUL byte at byte " + std::to_string(8 + header.find('\0')));
  }
  TopLevelKeys keys;
  if (!json::sax_parse(header, &keys))
    return Status::error(where + "the header (bytes 8.." + std::to_string(8 + header_size) + ") is not valid JSON");
  const json parsed = json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) return Status::error(where + "the header at byte 8 is not a JSON object");
  {
    std::set<std::string> seen;
    for (const std::string& key : keys.keys) {
      if (!seen.insert(key).second) return Status::error(where + "tensor '" + key + "' is named twice in the header");
    }
  }

  SafetensorsFile file;
  file.path_ = name;
  const uint64_t data_start = 8 + header_size;
  const uint64_t data_size = bytes.size() - data_start;
  file.data_ = bytes.subspan(data_start);
  for (const auto& [key, value] : parsed.items()) {
    const std::string tensor_where = where + "tensor '" + key + "': ";
    if (key == "__metadata__") {
      if (!value.is_object()) return Status::error(where + "__metadata__ is not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) return Status::error(where + "__metadata__ value '" + k + "' is not a string");
        file.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    if (!value.is_object()) return Status::error(tensor_where + "its entry is not an object");
    for (const auto& [field, ignored] : value.items()) {
      if (field != "dtype" && field != "shape" && field != "data_offsets") {
        return Status::error(tensor_where + "unknown field '" + field + "'");
      }
    }
    SafetensorsTensor t;
    t.name = key;
    const auto dtype = value.find("dtype");
    if (dtype == value.end() || !dtype->is_string()) return Status::error(tensor_where + "no dtype string");
    const std::optional<SafetensorsDtype> known = dtype_from_name(dtype->get<std::string>());
    if (!known) return Status::error(tensor_where + "unknown dtype '" + dtype->get<std::string>() + "'");
    t.dtype = *known;
    const auto shape = value.find("shape");
    if (shape == value.end() || !shape->is_array()) return Status::error(tensor_where + "no shape list");
    if (shape->size() > 8)
      return Status::error(tensor_where + "a shape of " + std::to_string(shape->size()) + " dimensions");
    uint64_t elements = 1;
    for (const json& d : *shape) {
      if (!d.is_number_unsigned()) return Status::error(tensor_where + "a shape entry is not a non-negative integer");
      const uint64_t dim = d.get<uint64_t>();
      if (dim > (uint64_t{1} << 48) || (dim != 0 && elements > std::numeric_limits<uint64_t>::max() / dim)) {
        return Status::error(tensor_where + "its shape's element count overflows");
      }
      elements *= dim;
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    const auto offsets = value.find("data_offsets");
    if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned()) {
      return Status::error(tensor_where + "data_offsets must be two non-negative integers");
    }
    t.begin = (*offsets)[0].get<uint64_t>();
    t.end = (*offsets)[1].get<uint64_t>();
    if (t.begin > t.end || t.end > data_size) {
      return Status::error(tensor_where + "bytes " + std::to_string(t.begin) + ".." + std::to_string(t.end) +
                           " of the data section (at byte " + std::to_string(data_start + t.begin) +
                           " of the file) do not fit its " + std::to_string(data_size) + " bytes");
    }
    const size_t size = safetensors_dtype_bytes(t.dtype);
    if (elements > std::numeric_limits<uint64_t>::max() / size || elements * size != t.end - t.begin) {
      return Status::error(tensor_where + std::to_string(elements) + " elements of " +
                           std::string(dtype->get<std::string>()) + " need " + std::to_string(elements * size) +
                           " bytes, its range at byte " + std::to_string(data_start + t.begin) + " has " +
                           std::to_string(t.end - t.begin));
    }
    file.tensors_.push_back(std::move(t));
  }
  // The ranges tile the data section: sorted by start, each begins where the last ended.
  std::sort(file.tensors_.begin(), file.tensors_.end(), [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  for (const SafetensorsTensor& t : file.tensors_) {
    if (t.begin < covered) {
      return Status::error(where + "tensor '" + t.name + "' at byte " + std::to_string(data_start + t.begin) +
                           " overlaps the tensor before it");
    }
    if (t.begin > covered) {
      return Status::error(where + "bytes " + std::to_string(data_start + covered) + ".." +
                           std::to_string(data_start + t.begin) + " before tensor '" + t.name +
                           "' belong to no tensor");
    }
    covered = t.end;
  }
  if (covered != data_size) {
    return Status::error(where + "bytes " + std::to_string(data_start + covered) + ".." + std::to_string(bytes.size()) +
                         " at the end of the file belong to no tensor");
  }
  for (size_t i = 0; i < file.tensors_.size(); ++i) file.index_.emplace(file.tensors_[i].name, i);
  return file;
}

Expected<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  Expected<MappedFile> mapped = MappedFile::open(path, "safetensors");
  if (!mapped) return mapped.status();
  auto mapping = std::make_shared<MappedFile>(std::move(mapped).value());
  Expected<SafetensorsFile> parsed = parse(mapping->bytes(), path);
  if (!parsed) return parsed.status();
  SafetensorsFile file = std::move(parsed).value();
  file.mapping_ = std::move(mapping);
  return file;
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const uint8_t> SafetensorsFile::data(const SafetensorsTensor& tensor) const {
  return data_.subspan(tensor.begin, tensor.end - tensor.begin);
}

}  // namespace folio
