// libFuzzer target: SafetensorsFile::parse on arbitrary bytes. It must return a file or a
// Status, never crash, hang or trip a sanitizer; an accepted file's tensors must lie inside the
// input, tile the data section in order, and have byte ranges equal to element count times the
// dtype's size (checked here, so that a violation is a crash the fuzzer keeps).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "model/safetensors_file.h"

namespace {

void require(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  folio::Expected<folio::SafetensorsFile> file = folio::SafetensorsFile::parse(bytes, "fuzz");
  if (!file) {
    require(!file.error().empty());
    return 0;
  }
  uint64_t covered = 0;
  for (const folio::SafetensorsTensor& t : file->tensors()) {
    require(t.begin == covered);
    require(static_cast<uint64_t>(t.num_elements()) * folio::safetensors_dtype_bytes(t.dtype) == t.num_bytes());
    const std::span<const uint8_t> body = file->data(t);
    require(body.size() == t.num_bytes());
    require(body.empty() || (body.data() >= data && body.data() + body.size() <= data + size));
    volatile uint8_t sink = 0;
    for (uint8_t b : body) sink = sink ^ b;  // every byte readable
    require(file->find(t.name) == &t);
    covered = t.end;
  }
  return 0;
}
