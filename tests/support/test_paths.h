// Where tests find the repository's goldens and the models cache.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace folio::testing {

inline std::string source_dir() {
  return FOLIO_SOURCE_DIR;
}

inline std::string models_dir() {
  if (const char* dir = std::getenv("FOLIO_MODELS_DIR"); dir != nullptr && *dir != '\0') return dir;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.cache/folio/models";
}

inline std::string default_model_path() {
  return models_dir() + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

// Gemma 3 270M Q4_K_M (scripts/fetch-model gemma3).
inline std::string gemma3_model_path() {
  return models_dir() + "/gemma-3-270m-q4_k_m.gguf";
}

inline std::string missing_model_message(const std::string& path) {
  return "missing " + path + ": run scripts/fetch-model all (make test does)";
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace folio::testing
