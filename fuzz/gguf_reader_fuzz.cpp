// libFuzzer target for the GGUF reader: any byte string must parse or fail with a Status,
// never read out of bounds. On success every metadata value and every tensor byte is read, so
// the sanitizers see any pointer or size the reader got wrong.
#include <cstddef>
#include <cstdint>
#include <span>

#include "model/gguf_file.h"

namespace {

uint64_t checksum_value(const folio::GgufValue& value) {
  uint64_t sum = static_cast<uint64_t>(value.type);
  if (const std::string* text = value.as_string()) {
    for (char c : *text) sum = sum * 31 + static_cast<unsigned char>(c);
  } else if (const folio::GgufArray* array = value.as_array()) {
    for (const folio::GgufValue& item : array->items) sum = sum * 31 + checksum_value(item);
  } else {
    sum += static_cast<uint64_t>(value.as_int().value_or(0));
    sum += static_cast<uint64_t>(value.as_float().value_or(0.0) != 0.0);
    sum += value.as_bool().value_or(false) ? 1 : 0;
  }
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  folio::Expected<folio::GgufFile> file = folio::GgufFile::parse(std::span(data, size));
  if (!file.has_value()) {
    // Errors must be messages a user can act on, never empty.
    if (file.error().empty()) __builtin_trap();
    return 0;
  }
  uint64_t sum = 0;
  for (const auto& [key, value] : file->metadata()) {
    sum += key.size() + checksum_value(value);
    // The typed getters walk the same values through their own paths.
    sum += file->get_int(key).value_or(0);
    sum += file->get_float(key).has_value() + file->get_bool(key).value_or(false);
    if (auto text = file->get_string(key)) sum += text->size();
    if (auto strings = file->get_string_array(key)) sum += strings->size();
    if (auto floats = file->get_float_array(key)) sum += floats->size();
    if (auto ints = file->get_int_array(key)) sum += ints->size();
  }
  for (const folio::GgufTensorInfo& info : file->tensors()) {
    if (file->find_tensor(info.name) != &info) __builtin_trap();
    const uint8_t* bytes = file->tensor_data(info);
    if (bytes < data || bytes + info.num_bytes > data + size) __builtin_trap();
    for (uint64_t i = 0; i < info.num_bytes; ++i) sum += bytes[i];
  }
  // Keep the reads from being optimized away.
  volatile uint64_t sink = sum;
  (void)sink;
  return 0;
}
