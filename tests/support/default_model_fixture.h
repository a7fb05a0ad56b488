// Test fixtures holding a model, its tokenizer, a CPU backend and the perplexity text's tokens,
// loaded once per test suite: engine tests derive from one instead of each loading a model.
//   DefaultModelTest: the default model (SmolLM2 GGUF), for behaviour that needs trained weights
//     and the real vocabulary (stop strings in real text, chat tokens, beam search).
//   SmallModelTest: a random-weight Llama of 4 layers and hidden 128 with Q4_1 weights (the
//     default model's type, so the same matmul kernels) and a 300-token byte-level vocabulary,
//     for the engine's batching, caching and preemption invariants: a forward pass is ~100x
//     cheaper than SmolLM2's, which keeps these tests fast under the sanitizers too.
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
#include "support/tiny_model.h"
#include "text/tokenizer.h"

namespace folio::testing {

class ModelFixtureBase : public ::testing::Test {
 protected:
  static void load_text_and_backend() {
    backend_ = new cpu::CpuBackend();
    text_tokens_ = new std::vector<int32_t>(
        tokenizer_->encode(read_file(source_dir() + "/tests/data/perplexity.txt"), false, false));
  }
  static void release_text_and_backend() {
    delete text_tokens_;
    delete backend_;
    text_tokens_ = nullptr;
    backend_ = nullptr;
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

  static inline ModelWeights* model_ = nullptr;
  static inline const Tokenizer* tokenizer_ = nullptr;
  static inline cpu::CpuBackend* backend_ = nullptr;
  static inline std::vector<int32_t>* text_tokens_ = nullptr;
};

class DefaultModelTest : public ModelFixtureBase {
 protected:
  static void SetUpTestSuite() {
    const std::string path = default_model_path();
    ASSERT_TRUE(std::filesystem::exists(path)) << missing_model_message(path);
    file_ = new GgufFile(std::move(GgufFile::open(path)).value());
    model_ = ModelWeights::load(*file_).value().release();
    owned_tokenizer_ = new Tokenizer(std::move(tokenizer_from_gguf(*file_)).value());
    tokenizer_ = owned_tokenizer_;
    load_text_and_backend();
  }
  static void TearDownTestSuite() {
    release_text_and_backend();
    delete owned_tokenizer_;
    delete model_;
    delete file_;
    owned_tokenizer_ = nullptr, tokenizer_ = nullptr, model_ = nullptr, file_ = nullptr;
  }

  static inline GgufFile* file_ = nullptr;
  static inline Tokenizer* owned_tokenizer_ = nullptr;
};

class SmallModelTest : public ModelFixtureBase {
 protected:
  static void SetUpTestSuite() {
    TinyModelOptions options;
    options.block_count = 4;
    options.embedding_length = 128;
    options.feed_forward_length = 256;
    options.head_count = 4;
    options.head_count_kv = 2;
    options.context_length = 4096;
    options.rope_dimension_count = 32;
    options.weight_type = DType::Q4_1;
    options.output_gain = 4.0f;  // peaky logits: sampled text keeps some structure
    tiny_ = TinyModel::create(options).value().release();
    model_ = &tiny_->model();
    tokenizer_ = &tiny_->tokenizer();
    load_text_and_backend();
  }
  static void TearDownTestSuite() {
    release_text_and_backend();
    delete tiny_;
    tiny_ = nullptr, model_ = nullptr, tokenizer_ = nullptr;
  }

  static inline TinyModel* tiny_ = nullptr;
};

}  // namespace folio::testing
