#include "model/safetensors_writer.h"

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

namespace folio {

Status write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const SafetensorsEntry& t : tensors) {
    uint64_t elements = 1;
    for (int64_t d : t.shape) elements *= static_cast<uint64_t>(d);
    if (elements * safetensors_dtype_bytes(t.dtype) != t.bytes.size()) {
      return Status::error("safetensors: tensor '" + t.name + "' has " + std::to_string(t.bytes.size()) +
                           " bytes for its shape");
    }
    header[t.name] = {{"dtype", std::string(safetensors_dtype_name(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::unique_ptr<FILE, int (*)(FILE*)> out(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!out) return Status::error("cannot write '" + path + "'");
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  bool ok =
      std::fwrite(length, 1, 8, out.get()) == 8 && std::fwrite(text.data(), 1, text.size(), out.get()) == text.size();
  for (const SafetensorsEntry& t : tensors) {
    ok = ok && std::fwrite(t.bytes.data(), 1, t.bytes.size(), out.get()) == t.bytes.size();
  }
  ok = ok && std::fflush(out.get()) == 0;
  if (!ok) return Status::error("cannot write '" + path + "' (disk full?)");
  return Status::ok();
}

}  // namespace folio
