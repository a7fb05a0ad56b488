// Writes a GGUF file (version 3) without holding the tensor data in memory: metadata and tensor
// infos are declared first, then write() streams each tensor's bytes, as a callback produces
// them, straight to the file. This is how `folio synth` writes 16 GB models.
//
//   GgufWriter writer;
//   writer.add_u32("llama.block_count", 32);
//   writer.add_tensor("blk.0.attn_q.weight", {4096, 4096}, DType::BF16, fill_q);
//   Status s = writer.write("model.gguf", progress);
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "model/gguf_file.h"

namespace folio {

class GgufWriter {
 public:
  // Fills `out` (the tensor's bytes from `offset`, out.size() of them; offsets advance in
  // chunks of whole rows) with the tensor's data.
  using TensorFill = std::function<void(uint64_t offset, std::span<uint8_t> out)>;

  GgufWriter& add_u32(std::string_view key, uint32_t value);
  GgufWriter& add_f32(std::string_view key, float value);
  GgufWriter& add_bool(std::string_view key, bool value);
  GgufWriter& add_string(std::string_view key, std::string_view value);
  GgufWriter& add_string_array(std::string_view key, const std::vector<std::string>& items);
  GgufWriter& add_i32_array(std::string_view key, const std::vector<int32_t>& items);
  // Any value as a reader parsed it, arrays of any element type included (copying metadata).
  GgufWriter& add_value(std::string_view key, const GgufValue& value);

  GgufWriter& add_tensor(std::string name, std::vector<uint64_t> dims, DType type, TensorFill fill);

  uint64_t data_bytes() const;
  // progress(bytes written, total bytes).
  Status write(const std::string& path, const std::function<void(uint64_t, uint64_t)>& progress = {}) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    DType type;
    TensorFill fill;
    uint64_t bytes = 0;
    uint64_t row_bytes = 0;
  };
  void key(std::string_view key, uint32_t type_id);
  void put(const void* data, size_t size);
  void put_string(std::string_view s);
  void put_payload(const GgufValue& value);  // the value's bytes after its type id

  static constexpr uint64_t kAlignment = 32;
  std::vector<uint8_t> metadata_;
  uint64_t metadata_count_ = 0;
  std::vector<Tensor> tensors_;
};

}  // namespace folio
