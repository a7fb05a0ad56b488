// The weights of a Hugging Face model directory: model.safetensors, or the shards that
// model.safetensors.index.json's weight_map names, each memory-mapped and validated
// (safetensors_file.h). Every tensor the index names must be in the shard it names, and no
// tensor may be in two shards.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/safetensors_file.h"

namespace folio {

class HfCheckpoint {
 public:
  static Expected<HfCheckpoint> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  // The tensor and the file holding it, or null.
  struct Entry {
    const SafetensorsFile* file = nullptr;
    const SafetensorsTensor* tensor = nullptr;
  };
  Entry find(std::string_view name) const;
  size_t num_files() const { return files_.size(); }
  uint64_t total_bytes() const { return total_bytes_; }
  // Every tensor name, in file then data order.
  std::vector<std::string> tensor_names() const;

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Entry, std::less<>> tensors_;
  uint64_t total_bytes_ = 0;
};

// A tensor of F32 / F16 / BF16 as floats (row-major, its shape flattened); empty for other dtypes.
std::vector<float> hf_tensor_floats(const HfCheckpoint::Entry& entry);

// Whether the folder looks like a Hugging Face model directory (config.json inside).
bool is_hf_model_dir(const std::string& path);

}  // namespace folio
