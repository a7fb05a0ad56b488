// A test fixture holding the default model (SmolLM2 GGUF), its tokenizer, a CPU backend and
// the perplexity text's tokens, loaded once per test suite: engine tests derive from it
// instead of each loading the model their own way.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "engine/request.h"
#include "model/gguf_file.h"
#include "model/gguf_tokenizer.h"
#include "model/model_weights.h"
#include "support/test_paths.h"
#include "text/tokenizer.h"

namespace folio::testing {

class DefaultModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = default_model_path();
    ASSERT_TRUE(std::filesystem::exists(path)) << missing_model_message(path);
    file_ = new GgufFile(std::move(GgufFile::open(path)).value());
    model_ = ModelWeights::load(*file_).value().release();
    tokenizer_ = new Tokenizer(std::move(tokenizer_from_gguf(*file_)).value());
    backend_ = new cpu::CpuBackend();
    text_tokens_ = new std::vector<int32_t>(
        tokenizer_->encode(read_file(source_dir() + "/tests/data/perplexity.txt"), false, false));
  }
  static void TearDownTestSuite() {
    delete text_tokens_;
    delete backend_;
    delete tokenizer_;
    delete model_;
    delete file_;
  }

  // Distinct prompts of any length: slices of a long real text.
  static std::vector<int32_t> slice(size_t offset, size_t length) {
    return {text_tokens_->begin() + offset, text_tokens_->begin() + offset + length};
  }

  // Greedy with a fixed length, so that outputs compare completely.
  static RequestParams greedy(int32_t max_tokens) {
    RequestParams params;
    params.sampling.temperature = 0.0f;
    params.max_tokens = max_tokens;
    params.ignore_eos = true;
    return params;
  }

  static inline GgufFile* file_ = nullptr;
  static inline ModelWeights* model_ = nullptr;
  static inline Tokenizer* tokenizer_ = nullptr;
  static inline cpu::CpuBackend* backend_ = nullptr;
  static inline std::vector<int32_t>* text_tokens_ = nullptr;
};

}  // namespace folio::testing
