#include "model/hf_checkpoint.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/fp16.h"

namespace folio {

std::vector<float> hf_tensor_floats(const HfCheckpoint::Entry& entry) {
  const SafetensorsDtype dtype = entry.tensor->dtype;
  if (dtype != SafetensorsDtype::kF32 && dtype != SafetensorsDtype::kF16 && dtype != SafetensorsDtype::kBF16) return {};
  const uint8_t* data = entry.file->data(*entry.tensor).data();
  std::vector<float> out(static_cast<size_t>(entry.tensor->num_elements()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (dtype == SafetensorsDtype::kF32) {
      std::memcpy(&out[i], data + 4 * i, 4);
      continue;
    }
    uint16_t bits;
    std::memcpy(&bits, data + 2 * i, 2);
    out[i] = dtype == SafetensorsDtype::kF16 ? fp16_to_fp32(bits) : bf16_to_fp32(bits);
  }
  return out;
}

bool is_hf_model_dir(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) && std::filesystem::exists(path + "/config.json", ec);
}

Expected<HfCheckpoint> HfCheckpoint::open(const std::string& dir) {
  HfCheckpoint c;
  c.dir_ = dir;
  const std::string index_path = dir + "/model.safetensors.index.json";
  const std::string single_path = dir + "/model.safetensors";
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name
  std::vector<std::string> shards;
  std::error_code ec;
  if (std::filesystem::exists(index_path, ec)) {
    std::ifstream in(index_path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const nlohmann::json index = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
      return Status::error(index_path + ": no weight_map object");
    }
    std::set<std::string> seen;
    for (const auto& [tensor, file] : index["weight_map"].items()) {
      if (!file.is_string()) return Status::error(index_path + ": the shard of '" + tensor + "' is not a file name");
      const std::string shard = file.get<std::string>();
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..") {
        return Status::error(index_path + ": shard '" + shard + "' of '" + tensor + "' is not a file in the directory");
      }
      weight_map[tensor] = shard;
      if (seen.insert(shard).second) shards.push_back(shard);
    }
    if (shards.empty()) return Status::error(index_path + ": the weight_map is empty");
  } else if (std::filesystem::exists(single_path, ec)) {
    shards.push_back("model.safetensors");
  } else {
    return Status::error(dir + ": no model.safetensors and no model.safetensors.index.json");
  }
  for (const std::string& shard : shards) {
    const std::string path = dir + "/" + shard;
    if (!std::filesystem::exists(path, ec)) return Status::error(path + ": a shard the index names is missing");
    Expected<SafetensorsFile> file = SafetensorsFile::open(path);
    if (!file) return file.status();
    c.files_.push_back(std::make_unique<SafetensorsFile>(std::move(file).value()));
    const SafetensorsFile& f = *c.files_.back();
    for (const SafetensorsTensor& t : f.tensors()) {
      if (!weight_map.empty()) {
        const auto named = weight_map.find(t.name);
        if (named == weight_map.end() || named->second != shard) continue;  // the index decides
      }
      if (c.tensors_.contains(t.name)) return Status::error(path + ": tensor '" + t.name + "' is in two shards");
      c.tensors_[t.name] = Entry{&f, &t};
      c.total_bytes_ += t.num_bytes();
    }
  }
  for (const auto& [tensor, shard] : weight_map) {
    if (!c.tensors_.contains(tensor)) {
      return Status::error(dir + "/" + shard + ": the index names tensor '" + tensor + "', which this shard lacks");
    }
  }
  return c;
}

HfCheckpoint::Entry HfCheckpoint::find(std::string_view name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? Entry{} : it->second;
}

std::vector<std::string> HfCheckpoint::tensor_names() const {
  std::vector<std::string> names;
  for (const auto& file : files_) {
    for (const SafetensorsTensor& t : file->tensors()) {
      const auto it = tensors_.find(t.name);
      if (it != tensors_.end() && it->second.tensor == &t) names.push_back(t.name);
    }
  }
  return names;
}

}  // namespace folio
