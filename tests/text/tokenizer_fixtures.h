// Shared by the tokenizer tests: the five reference vocabularies, loaded once per process, and
// the golden corpus (tests/golden/tokenizer, written by scripts/make-tokenizer-goldens.py).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/gguf_file.h"
#include "model/gguf_tokenizer.h"
#include "support/test_paths.h"
#include "text/tokenizer.h"

namespace folio::testing {

struct VocabSpec {
  std::string golden;  // tests/golden/tokenizer/<golden>.jsonl
  std::string file;    // in the models dir or its vocab/ subfolder
};

inline const std::vector<VocabSpec>& reference_vocabs() {
  static const std::vector<VocabSpec> kVocabs = {
      {"smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"},
      {"llama-bpe", "ggml-vocab-llama-bpe.gguf"},
      {"qwen2", "ggml-vocab-qwen2.gguf"},
      {"llama-spm", "ggml-vocab-llama-spm.gguf"},
      {"gemma3", "gemma-3-270m-q4_k_m.gguf"},  // Gemma 3 270M's SentencePiece vocabulary (262k)
  };
  return kVocabs;
}

// Model files sit in the models dir, vocabulary-only files in its vocab/ subfolder; either is
// accepted in either place.
inline std::string vocab_path(const std::string& file) {
  const std::string direct = models_dir() + "/" + file;
  const std::string in_vocab = models_dir() + "/vocab/" + file;
  if (std::filesystem::exists(direct)) return direct;
  if (std::filesystem::exists(in_vocab)) return in_vocab;
  return file.starts_with("ggml-vocab-") ? in_vocab : direct;
}

// Loads (once) the tokenizer of a reference vocabulary; on failure records why in *error.
inline const Tokenizer* load_reference_tokenizer(const std::string& golden, std::string* error) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  static std::map<std::string, std::string> errors;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(golden); it != cache.end()) return it->second.get();
  if (auto it = errors.find(golden); it != errors.end()) {
    *error = it->second;
    return nullptr;
  }
  std::string file;
  for (const VocabSpec& spec : reference_vocabs()) {
    if (spec.golden == golden) file = spec.file;
  }
  const std::string path = vocab_path(file);
  std::string why;
  if (!std::filesystem::exists(path)) {
    why = missing_model_message(path);
  } else if (Expected<GgufFile> gguf = GgufFile::open(path); !gguf) {
    why = "cannot read " + path + ": " + gguf.error();
  } else if (Expected<Tokenizer> tokenizer = tokenizer_from_gguf(*gguf); !tokenizer) {
    why = "cannot build a tokenizer from " + path + ": " + tokenizer.error();
  } else {
    return (cache[golden] = std::make_unique<Tokenizer>(std::move(tokenizer.value()))).get();
  }
  errors[golden] = why;
  *error = why;
  return nullptr;
}

// Fails the current test (and returns null) when the vocabulary cannot be loaded.
#define FOLIO_LOAD_TOKENIZER_OR_FAIL(var, golden)                                                   \
  std::string var##_error;                                                                          \
  const ::folio::Tokenizer* var = ::folio::testing::load_reference_tokenizer(golden, &var##_error); \
  if (var == nullptr) {                                                                             \
    FAIL() << var##_error;                                                                          \
  }

struct CorpusEntry {
  int id = 0;
  std::string kind;
  std::string bytes;
};

inline std::string golden_dir() {
  return source_dir() + "/tests/golden/tokenizer";
}

inline std::string hex_to_bytes(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> records;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) records.push_back(nlohmann::json::parse(line));
  }
  return records;
}

inline const std::vector<CorpusEntry>& golden_corpus() {
  static const std::vector<CorpusEntry> kCorpus = [] {
    std::vector<CorpusEntry> corpus;
    for (const nlohmann::json& record : read_jsonl(golden_dir() + "/corpus.jsonl")) {
      corpus.push_back({record.at("id").get<int>(), record.at("kind").get<std::string>(),
                        hex_to_bytes(record.at("hex").get<std::string>())});
    }
    return corpus;
  }();
  return kCorpus;
}

}  // namespace folio::testing
