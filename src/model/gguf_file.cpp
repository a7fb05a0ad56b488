// GGUF reader. The layout (all little-endian):
//
//   header      magic "GGUF" | u32 version | u64 tensor_count | u64 metadata_count
//   metadata    metadata_count x { string key | u32 value_type | value }
//   tensor info tensor_count x { string name | u32 n_dims | u64 dims[n] | u32 type | u64 offset }
//   padding     up to a multiple of general.alignment (default 32)
//   data        tensor bytes; each tensor's offset is relative to here and aligned
//
// A string is u64 length + bytes (no terminator); an array is u32 element_type + u64 count +
// elements. The file is untrusted input: every read is bounds-checked, every count is checked
// against the bytes that could hold it before anything is reserved, and sizes use checked
// arithmetic. Choices stricter than llama.cpp (kept so that a loaded tensor is always usable):
// dimensions must be >= 1, n_dims must be 1..4, bool values must be 0 or 1.
#include "model/gguf_file.h"

#include "core/mapped_file.h"

#include <bit>
#include <cerrno>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <type_traits>

namespace folio {

static_assert(std::endian::native == std::endian::little,
              "the reader copies GGUF's little-endian fields straight into host integers");

// The file's mapping, when the GgufFile opened it.
struct GgufFile::Mapping {
  explicit Mapping(MappedFile file) : file(std::move(file)) {}
  MappedFile file;
};

namespace {

constexpr uint32_t kMagic = 0x46554747u;  // "GGUF" read as a little-endian u32
constexpr int kMaxArrayDepth = 8;         // deeper nesting is refused rather than recursed into
constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kMaxAlignment = uint64_t{1} << 31;  // the spec stores it as a u32
constexpr uint64_t kInt64Max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

// Smallest possible encodings: a count larger than remaining_bytes / smallest is a lie, and is
// refused before any memory is reserved for it.
constexpr uint64_t kMinMetadataEntryBytes = 8 + 4 + 1;  // empty key, type, 1-byte value
// Empty name, n_dims, one dim, type, offset.
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

bool is_known_value_type(uint32_t raw) {
  return raw <= static_cast<uint32_t>(GgufValueType::FLOAT64);
}

// Indexed by GgufValueType: a fixed value's size; a string's length field; an array's element
// type and count.
constexpr uint64_t kMinEncodedBytes[] = {1, 1, 2, 2, 4, 4, 4, 1, 8, 4 + 8, 8, 8, 8};
uint64_t min_encoded_bytes(GgufValueType type) {
  return kMinEncodedBytes[static_cast<uint32_t>(type)];
}

bool is_unsigned_type(GgufValueType type) {
  return type == GgufValueType::UINT8 || type == GgufValueType::UINT16 || type == GgufValueType::UINT32 ||
         type == GgufValueType::UINT64;
}

bool is_signed_type(GgufValueType type) {
  return type == GgufValueType::INT8 || type == GgufValueType::INT16 || type == GgufValueType::INT32 ||
         type == GgufValueType::INT64;
}

bool is_float_type(GgufValueType type) {
  return type == GgufValueType::FLOAT32 || type == GgufValueType::FLOAT64;
}

// Names and keys from a broken file may hold any bytes; messages show at most 80 of them with
// control bytes escaped so that the message stays one readable line.
std::string printable(std::string_view text) {
  constexpr size_t kMaxShown = 80;
  std::string out;
  for (size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x20 || byte == 0x7f || byte == '\'' || byte == '\\') {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    } else {
      out += static_cast<char>(byte);
    }
  }
  if (text.size() > kMaxShown) out += "...";
  return out;
}

// Bounds-checked cursor over the file's bytes.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  uint64_t offset() const { return offset_; }
  uint64_t remaining() const { return bytes_.size() - offset_; }

  template <typename T>
  bool read(T* out) {
    if (remaining() < sizeof(T)) return false;
    std::memcpy(out, bytes_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return true;
  }

  // `length` must already be checked against remaining().
  std::string_view take(uint64_t length) {
    const auto* start = reinterpret_cast<const char*>(bytes_.data() + offset_);
    offset_ += length;
    return std::string_view(start, static_cast<size_t>(length));
  }

 private:
  std::span<const uint8_t> bytes_;
  uint64_t offset_ = 0;
};

// The header, metadata and tensor infos, in file order. `subject_` names what is being read
// ("header", "metadata key 'x'", "tensor 'y' info") so every error says where it happened.
class Parser {
 public:
  explicit Parser(std::span<const uint8_t> bytes) : reader_(bytes), file_size_(bytes.size()) {}

  Status parse_header(uint32_t* version, uint64_t* tensor_count, uint64_t* metadata_count);
  Status parse_metadata(uint64_t count, std::map<std::string, GgufValue, std::less<>>* metadata, uint64_t* alignment);
  Status parse_tensor_infos(uint64_t count, uint64_t alignment, std::vector<GgufTensorInfo>* tensors,
                            std::map<std::string, size_t, std::less<>>* tensor_index);
  Status place_data_section(uint64_t alignment, std::vector<GgufTensorInfo>& tensors, uint64_t* data_offset);

 private:
  // "<subject> at offset <offset>: <parts...>"; numeric parts are printed in decimal.
  template <typename... Parts>
  Status fail(uint64_t offset, const Parts&... parts) const {
    std::string message = subject_ + " at offset " + std::to_string(offset) + ": ";
    (append(message, parts), ...);
    return Status::error(std::move(message));
  }
  template <typename Part>
  static void append(std::string& message, const Part& part) {
    if constexpr (std::is_arithmetic_v<Part>) {
      message += std::to_string(part);
    } else {
      message += part;
    }
  }

  template <typename T>
  Status read_field(std::string_view field, T* out) {
    const uint64_t at = reader_.offset();
    if (reader_.read(out)) return Status::ok();
    return fail(at, "file ends inside the ", field, " (", sizeof(T), " bytes needed, ", reader_.remaining(), " left)");
  }

  // Reads a fixed-size value and widens it to the variant's storage type.
  template <typename Raw, typename Stored>
  Status read_scalar(std::string_view field, GgufValue* out) {
    Raw value{};
    if (Status s = read_field(field, &value); !s) return s;
    out->data = static_cast<Stored>(value);
    return Status::ok();
  }

  Status read_string(std::string_view field, std::string* out);
  Status read_value(GgufValueType type, int depth, GgufValue* out);
  Status read_array(int depth, GgufValue* out);
  Status read_tensor_info(size_t index, uint64_t alignment, GgufTensorInfo* info,
                          const std::map<std::string, size_t, std::less<>>& tensor_index);

  Reader reader_;
  uint64_t file_size_;
  std::string subject_ = "header";
  std::vector<uint64_t> tensor_offset_fields_;  // where each tensor's offset field sits
};

Status Parser::parse_header(uint32_t* version, uint64_t* tensor_count, uint64_t* metadata_count) {
  subject_ = "header";
  uint32_t magic = 0;
  if (Status s = read_field("magic", &magic); !s) return s;
  if (magic != kMagic) {
    char shown[4];
    std::memcpy(shown, &magic, 4);
    return fail(0, "bad magic '", printable(std::string_view(shown, 4)), "', expected 'GGUF' (not a GGUF file)");
  }
  const uint64_t version_at = reader_.offset();
  if (Status s = read_field("version", version); !s) return s;
  if (*version == 1) {
    return fail(version_at,
                "GGUF version 1 is not supported (folio reads versions 2 and 3); re-convert the "
                "model with a current llama.cpp");
  }
  const uint32_t swapped = __builtin_bswap32(*version);
  if ((*version & 0xffffu) == 0 && swapped >= 1 && swapped <= 3) {
    return fail(version_at, "big-endian GGUF file (version field reads ", swapped,
                " byte-swapped); folio reads little-endian files only");
  }
  if (*version != 2 && *version != 3) {
    return fail(version_at, "unsupported GGUF version ", *version, " (folio reads versions 2 and 3)");
  }
  const uint64_t tensor_count_at = reader_.offset();
  if (Status s = read_field("tensor count", tensor_count); !s) return s;
  const uint64_t metadata_count_at = reader_.offset();
  if (Status s = read_field("metadata count", metadata_count); !s) return s;
  if (*tensor_count > reader_.remaining() / kMinTensorInfoBytes) {
    return fail(tensor_count_at, "tensor count ", *tensor_count, " cannot fit in the ", reader_.remaining(),
                " bytes left");
  }
  if (*metadata_count > reader_.remaining() / kMinMetadataEntryBytes) {
    return fail(metadata_count_at, "metadata count ", *metadata_count, " cannot fit in the ", reader_.remaining(),
                " bytes left");
  }
  return Status::ok();
}

Status Parser::read_string(std::string_view field, std::string* out) {
  const uint64_t at = reader_.offset();
  uint64_t length = 0;
  if (Status s = read_field(std::string(field) + " length", &length); !s) return s;
  if (length > reader_.remaining()) {
    return fail(at, field, " length ", length, " exceeds the ", reader_.remaining(), " bytes left in the file");
  }
  out->assign(reader_.take(length));
  return Status::ok();
}

Status Parser::read_value(GgufValueType type, int depth, GgufValue* out) {
  out->type = type;
  const uint64_t at = reader_.offset();
  switch (type) {
    case GgufValueType::UINT8: return read_scalar<uint8_t, uint64_t>("uint8 value", out);
    case GgufValueType::INT8: return read_scalar<int8_t, int64_t>("int8 value", out);
    case GgufValueType::UINT16: return read_scalar<uint16_t, uint64_t>("uint16 value", out);
    case GgufValueType::INT16: return read_scalar<int16_t, int64_t>("int16 value", out);
    case GgufValueType::UINT32: return read_scalar<uint32_t, uint64_t>("uint32 value", out);
    case GgufValueType::INT32: return read_scalar<int32_t, int64_t>("int32 value", out);
    case GgufValueType::UINT64: return read_scalar<uint64_t, uint64_t>("uint64 value", out);
    case GgufValueType::INT64: return read_scalar<int64_t, int64_t>("int64 value", out);
    case GgufValueType::FLOAT32: return read_scalar<float, double>("float32 value", out);
    case GgufValueType::FLOAT64: return read_scalar<double, double>("float64 value", out);
    case GgufValueType::BOOL: {
      uint8_t value = 0;
      if (Status s = read_field("bool value", &value); !s) return s;
      if (value > 1) return fail(at, "bool value ", value, " is not 0 or 1");
      out->data = uint64_t{value};
      return Status::ok();
    }
    case GgufValueType::STRING: {
      std::string text;
      if (Status s = read_string("string value", &text); !s) return s;
      out->data = std::move(text);
      return Status::ok();
    }
    case GgufValueType::ARRAY: return read_array(depth, out);
  }
  return fail(at, "unknown value type ", static_cast<uint32_t>(type));
}

Status Parser::read_array(int depth, GgufValue* out) {
  const uint64_t at = reader_.offset();
  if (depth >= kMaxArrayDepth) {
    return fail(at, "arrays nested deeper than ", kMaxArrayDepth, " levels");
  }
  uint32_t raw_element_type = 0;
  if (Status s = read_field("array element type", &raw_element_type); !s) return s;
  if (!is_known_value_type(raw_element_type)) {
    return fail(at, "unknown array element type ", raw_element_type);
  }
  const auto element_type = static_cast<GgufValueType>(raw_element_type);
  const uint64_t count_at = reader_.offset();
  uint64_t count = 0;
  if (Status s = read_field("array count", &count); !s) return s;
  if (count > reader_.remaining() / min_encoded_bytes(element_type)) {
    return fail(count_at, "array count ", count, " cannot fit in the ", reader_.remaining(), " bytes left");
  }
  GgufArray array;
  array.element_type = element_type;
  array.items.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) {
    array.items.emplace_back();
    if (Status s = read_value(element_type, depth + 1, &array.items.back()); !s) return s;
  }
  out->data = std::move(array);
  return Status::ok();
}

Status Parser::parse_metadata(uint64_t count, std::map<std::string, GgufValue, std::less<>>* metadata,
                              uint64_t* alignment) {
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t entry_at = reader_.offset();
    subject_ = "metadata entry " + std::to_string(i);
    std::string key;
    if (Status s = read_string("key", &key); !s) return s;
    subject_ = "metadata key '" + printable(key) + "'";
    if (metadata->find(key) != metadata->end()) return fail(entry_at, "duplicate key");

    const uint64_t type_at = reader_.offset();
    uint32_t raw_type = 0;
    if (Status s = read_field("value type", &raw_type); !s) return s;
    if (!is_known_value_type(raw_type)) {
      return fail(type_at, "unknown value type ", raw_type);
    }
    const uint64_t value_at = reader_.offset();
    GgufValue value;
    if (Status s = read_value(static_cast<GgufValueType>(raw_type), 0, &value); !s) return s;

    if (key == "general.alignment") {
      // Any integer type is accepted; the value must be a power of two a u32 can hold.
      const std::optional<int64_t> requested = value.as_int();
      if (!requested || *requested <= 0 || static_cast<uint64_t>(*requested) > kMaxAlignment ||
          !std::has_single_bit(static_cast<uint64_t>(*requested))) {
        return fail(value_at, "alignment must be a nonzero power of two up to 2^31 (got ",
                    requested ? std::to_string(*requested) : "a non-integer", ")");
      }
      *alignment = static_cast<uint64_t>(*requested);
    }
    metadata->emplace(std::move(key), std::move(value));
  }
  return Status::ok();
}

Status Parser::read_tensor_info(size_t index, uint64_t alignment, GgufTensorInfo* info,
                                const std::map<std::string, size_t, std::less<>>& tensor_index) {
  const uint64_t info_at = reader_.offset();
  subject_ = "tensor " + std::to_string(index) + " info";
  if (Status s = read_string("name", &info->name); !s) return s;
  subject_ = "tensor '" + printable(info->name) + "' info";
  if (auto it = tensor_index.find(info->name); it != tensor_index.end()) {
    return fail(info_at, "duplicate tensor name (tensor ", it->second, " has it too)");
  }

  const uint64_t n_dims_at = reader_.offset();
  uint32_t n_dims = 0;
  if (Status s = read_field("n_dims", &n_dims); !s) return s;
  if (n_dims == 0 || n_dims > kMaxDims) {
    return fail(n_dims_at, "n_dims is ", n_dims, ", must be 1 to ", kMaxDims);
  }
  uint64_t num_elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t dim_at = reader_.offset();
    uint64_t dim = 0;
    if (Status s = read_field("dims[" + std::to_string(d) + "]", &dim); !s) return s;
    if (dim == 0) return fail(dim_at, "dims[", d, "] is 0");
    if (__builtin_mul_overflow(num_elements, dim, &num_elements) || num_elements > kInt64Max) {
      return fail(dim_at, "element count overflows at dims[", d, "] = ", dim);
    }
    info->dims.push_back(static_cast<int64_t>(dim));  // <= num_elements <= INT64_MAX
  }
  info->num_elements = num_elements;

  const uint64_t type_at = reader_.offset();
  uint32_t type_id = 0;
  if (Status s = read_field("type id", &type_id); !s) return s;
  const std::optional<DTypeInfo> type = dtype_info(type_id);
  if (!type) return fail(type_at, "unknown type id ", type_id);
  info->type = type->type;
  if (info->dims[0] % type->block_elems != 0) {
    return fail(type_at, "dims[0] = ", info->dims[0], " is not a multiple of the ", type->name, " block size ",
                type->block_elems);
  }
  const uint64_t num_blocks = num_elements / static_cast<uint64_t>(type->block_elems);
  if (__builtin_mul_overflow(num_blocks, static_cast<uint64_t>(type->block_bytes), &info->num_bytes)) {
    return fail(type_at, "byte size overflows (", num_blocks, " blocks of ", type->block_bytes, " bytes)");
  }

  const uint64_t offset_at = reader_.offset();
  if (Status s = read_field("data offset", &info->offset); !s) return s;
  if (info->offset % alignment != 0) {
    return fail(offset_at, "data offset ", info->offset, " is not a multiple of the alignment ", alignment);
  }
  tensor_offset_fields_.push_back(offset_at);
  return Status::ok();
}

Status Parser::parse_tensor_infos(uint64_t count, uint64_t alignment, std::vector<GgufTensorInfo>* tensors,
                                  std::map<std::string, size_t, std::less<>>* tensor_index) {
  tensors->reserve(static_cast<size_t>(count));  // count was bounded by the file size
  tensor_offset_fields_.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) {
    GgufTensorInfo info;
    if (Status s = read_tensor_info(tensors->size(), alignment, &info, *tensor_index); !s) {
      return s;
    }
    tensor_index->emplace(info.name, tensors->size());
    tensors->push_back(std::move(info));
  }
  return Status::ok();
}

Status Parser::place_data_section(uint64_t alignment, std::vector<GgufTensorInfo>& tensors, uint64_t* data_offset) {
  const uint64_t infos_end = reader_.offset();
  // infos_end <= file size and alignment <= 2^31, so this cannot overflow.
  *data_offset = (infos_end + alignment - 1) / alignment * alignment;
  if (tensors.empty()) {
    // A file without tensors may end right after its metadata, without padding.
    if (*data_offset > file_size_) *data_offset = file_size_;
    return Status::ok();
  }
  if (*data_offset > file_size_) {
    subject_ = "data section";
    return fail(*data_offset, "starts past the end of the file (", file_size_, " bytes)");
  }
  const uint64_t data_size = file_size_ - *data_offset;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensorInfo& info = tensors[i];
    if (info.offset > data_size || info.num_bytes > data_size - info.offset) {
      subject_ = "tensor '" + printable(info.name) + "' info";
      return fail(tensor_offset_fields_[i], "data [", info.offset, ", ", info.offset, " + ", info.num_bytes,
                  ") runs past the end of the file (data section holds ", data_size, " bytes from offset ",
                  *data_offset, ")");
    }
  }
  return Status::ok();
}

// Converts every item of an array value, or gives nullopt: no value, not an array, another
// element kind, or an item that does not convert.
template <typename T, typename ElementOk, typename Convert>
std::optional<std::vector<T>> convert_array(const GgufValue* value, ElementOk element_ok, Convert convert) {
  const GgufArray* array = value ? value->as_array() : nullptr;
  if (!array || !element_ok(array->element_type)) return std::nullopt;
  std::vector<T> out;
  out.reserve(array->items.size());
  for (const GgufValue& item : array->items) {
    std::optional<T> converted = convert(item);
    if (!converted) return std::nullopt;
    out.push_back(std::move(*converted));
  }
  return out;
}

}  // namespace

// ---- GgufValue ----------------------------------------------------------------------------

std::optional<int64_t> GgufValue::as_int() const {
  if (const uint64_t* v = std::get_if<uint64_t>(&data); v && is_unsigned_type(type)) {
    if (*v > kInt64Max) return std::nullopt;  // does not fit int64
    return static_cast<int64_t>(*v);
  }
  if (const int64_t* v = std::get_if<int64_t>(&data); v && is_signed_type(type)) return *v;
  return std::nullopt;
}

std::optional<double> GgufValue::as_float() const {
  if (const double* v = std::get_if<double>(&data); v && is_float_type(type)) return *v;
  if (const uint64_t* v = std::get_if<uint64_t>(&data); v && is_unsigned_type(type)) {
    return static_cast<double>(*v);
  }
  if (const int64_t* v = std::get_if<int64_t>(&data); v && is_signed_type(type)) {
    return static_cast<double>(*v);
  }
  return std::nullopt;
}

std::optional<bool> GgufValue::as_bool() const {
  if (type != GgufValueType::BOOL) return std::nullopt;
  const uint64_t* value = std::get_if<uint64_t>(&data);
  if (!value) return std::nullopt;
  return *value != 0;
}

const std::string* GgufValue::as_string() const {
  return type == GgufValueType::STRING ? std::get_if<std::string>(&data) : nullptr;
}

const GgufArray* GgufValue::as_array() const {
  return type == GgufValueType::ARRAY ? std::get_if<GgufArray>(&data) : nullptr;
}

// ---- GgufFile -----------------------------------------------------------------------------

GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

Expected<GgufFile> GgufFile::parse(std::span<const uint8_t> bytes) {
  // Allocation sizes follow the file's counts (bounded by its size), so a huge file can still
  // run out of memory; that becomes an error, never an exception through the API.
  try {
    GgufFile file;
    file.bytes_ = bytes;
    Parser parser(bytes);
    uint64_t tensor_count = 0;
    uint64_t metadata_count = 0;
    Status status = parser.parse_header(&file.version_, &tensor_count, &metadata_count);
    if (status) {
      status = parser.parse_metadata(metadata_count, &file.metadata_, &file.alignment_);
    }
    if (status) {
      status = parser.parse_tensor_infos(tensor_count, file.alignment_, &file.tensors_, &file.tensor_index_);
    }
    if (status) status = parser.place_data_section(file.alignment_, file.tensors_, &file.data_offset_);
    if (!status) return Status::error("gguf: " + status.message());
    return file;
  } catch (const std::bad_alloc&) {
    return Status::error("gguf: out of memory while parsing a " + std::to_string(bytes.size()) + "-byte file");
  } catch (const std::exception& e) {
    return Status::error(std::string("gguf: unexpected error while parsing: ") + e.what());
  }
}

Expected<GgufFile> GgufFile::open(const std::string& path) {
  Expected<MappedFile> mapped = MappedFile::open(path, "gguf");
  if (!mapped) return mapped.status();
  std::unique_ptr<Mapping> mapping;
  try {
    mapping = std::make_unique<Mapping>(std::move(mapped).value());
  } catch (const std::bad_alloc&) {
    return Status::error("gguf: out of memory opening '" + path + "'");
  }
  Expected<GgufFile> parsed = parse(mapping->file.bytes());
  if (!parsed) {
    // Put the path after the "gguf: " prefix: "gguf: model.gguf: tensor 'x' info at ...".
    std::string_view message = parsed.error();
    if (message.starts_with("gguf: ")) message.remove_prefix(6);
    return Status::error("gguf: " + path + ": " + std::string(message));
  }
  GgufFile file = std::move(parsed).value();
  file.mapping_ = std::move(mapping);
  file.path_ = path;
  return file;
}

void GgufFile::release(std::string_view key) {
  if (auto it = metadata_.find(key); it != metadata_.end()) metadata_.erase(it);
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* value = find(key);
  return value ? value->as_int() : std::nullopt;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* value = find(key);
  return value ? value->as_float() : std::nullopt;
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* value = find(key);
  return value ? value->as_bool() : std::nullopt;
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* value = find(key);
  const std::string* text = value ? value->as_string() : nullptr;
  if (!text) return std::nullopt;
  return *text;
}

std::optional<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  return convert_array<std::string>(
      find(key), [](GgufValueType type) { return type == GgufValueType::STRING; },
      [](const GgufValue& item) -> std::optional<std::string> {
        const std::string* text = item.as_string();
        return text ? std::optional<std::string>(*text) : std::nullopt;
      });
}

std::optional<std::vector<float>> GgufFile::get_float_array(std::string_view key) const {
  return convert_array<float>(find(key), is_float_type, [](const GgufValue& item) {
    const std::optional<double> number = item.as_float();
    return number ? std::optional<float>(static_cast<float>(*number)) : std::nullopt;
  });
}

std::optional<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  return convert_array<int64_t>(
      find(key), [](GgufValueType type) { return is_unsigned_type(type) || is_signed_type(type); },
      [](const GgufValue& item) { return item.as_int(); });  // nullopt for a uint64 > INT64_MAX
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const uint8_t* GgufFile::tensor_data(const GgufTensorInfo& info) const {
  return bytes_.data() + data_offset_ + info.offset;
}

}  // namespace folio
