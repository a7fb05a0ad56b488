#include "model/safetensors_writer.h"

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

namespace folio {

namespace {

struct Described {
  const std::string* name;
  SafetensorsDtype dtype;
  const std::vector<int64_t>* shape;
};

uint64_t bytes_of(SafetensorsDtype dtype, const std::vector<int64_t>& shape) {
  uint64_t elements = 1;
  for (int64_t d : shape) elements *= static_cast<uint64_t>(d);
  return elements * safetensors_dtype_bytes(dtype);
}

// Opens path and writes the length and the header of these tensors, in this order.
Status write_header(FILE* out, const std::string& path, const std::vector<Described>& tensors,
                    const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const Described& t : tensors) {
    const uint64_t size = bytes_of(t.dtype, *t.shape);
    header[*t.name] = {{"dtype", std::string(safetensors_dtype_name(t.dtype))},
                       {"shape", *t.shape},
                       {"data_offsets", {offset, offset + size}}};
    offset += size;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  if (std::fwrite(length, 1, 8, out) != 8 || std::fwrite(text.data(), 1, text.size(), out) != text.size()) {
    return Status::error("cannot write '" + path + "' (disk full?)");
  }
  return Status::ok();
}

using File = std::unique_ptr<FILE, int (*)(FILE*)>;

}  // namespace

Status write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  std::vector<Described> described;
  for (const SafetensorsEntry& t : tensors) {
    if (bytes_of(t.dtype, t.shape) != t.bytes.size()) {
      return Status::error("safetensors: tensor '" + t.name + "' has " + std::to_string(t.bytes.size()) +
                           " bytes for its shape");
    }
    described.push_back({&t.name, t.dtype, &t.shape});
  }
  File out(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!out) return Status::error("cannot write '" + path + "'");
  if (Status s = write_header(out.get(), path, described, metadata); !s) return s;
  bool ok = true;
  for (const SafetensorsEntry& t : tensors) {
    ok = ok && std::fwrite(t.bytes.data(), 1, t.bytes.size(), out.get()) == t.bytes.size();
  }
  ok = ok && std::fflush(out.get()) == 0;
  ok = std::fclose(out.release()) == 0 && ok;
  if (!ok) return Status::error("cannot write '" + path + "' (disk full?)");
  return Status::ok();
}

Status write_safetensors_streamed(const std::string& path, const std::vector<SafetensorsStreamEntry>& tensors,
                                  const std::function<void(uint64_t, uint64_t)>& progress,
                                  const std::map<std::string, std::string>& metadata) {
  std::vector<Described> described;
  uint64_t total = 0;
  for (const SafetensorsStreamEntry& t : tensors) {
    described.push_back({&t.name, t.dtype, &t.shape});
    total += bytes_of(t.dtype, t.shape);
  }
  File out(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!out) return Status::error("cannot write '" + path + "'");
  if (Status s = write_header(out.get(), path, described, metadata); !s) return s;
  std::vector<uint8_t> bytes;
  uint64_t done = 0;
  for (const SafetensorsStreamEntry& t : tensors) {
    bytes.assign(bytes_of(t.dtype, t.shape), 0);
    t.make(bytes);
    if (std::fwrite(bytes.data(), 1, bytes.size(), out.get()) != bytes.size()) {
      return Status::error("cannot write '" + path + "' (disk full?)");
    }
    done += bytes.size();
    if (progress) progress(done, total);
  }
  // The last bytes reach the disk at close: its result counts too.
  if (std::fflush(out.get()) != 0 || std::fclose(out.release()) != 0) {
    return Status::error("cannot write '" + path + "' (disk full?)");
  }
  return Status::ok();
}

}  // namespace folio
