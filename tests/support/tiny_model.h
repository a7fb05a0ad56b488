// A tiny Llama-shaped model with random weights, built in memory for tests that need a real
// model but not a trained one (engine invariants, scheduling, batching): 2 layers, hidden 64,
// 4 query heads over 2 KV heads, a 300-token byte-level BPE vocabulary. A forward pass costs
// microseconds, so tests can run thousands of engine steps.
//
//   auto tiny = folio::testing::TinyModel::create();   // fixed seed: the same weights each time
//   Engine engine(tiny->model(), backend, tiny->tokenizer(), config);
//
// The vocabulary: id 0 is "<|endoftext|>" (BOS, EOS, control), ids 1..256 the byte-level
// alphabet (id 1 + byte), ids 257..299 merge results (" the", "ing", ...), so any text encodes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "model/gguf_file.h"
#include "model/model_weights.h"
#include "text/tokenizer.h"

namespace folio::testing {

struct TinyModelOptions {
  int32_t block_count = 2;
  int32_t embedding_length = 64;
  int32_t feed_forward_length = 128;
  int32_t head_count = 4;
  int32_t head_count_kv = 2;
  int32_t context_length = 512;
  int32_t rope_dimension_count = 16;
  uint64_t seed = 0x5EED;
  // Type of the 2-D weights: F32, F16 or a type quant::quantize_row_reference supports (Q8_0,
  // Q4_0, ...; rows are embedding_length or feed_forward_length long, so 32-element blocks fit).
  DType weight_type = DType::F32;
  // About the standard deviation of the logits: larger makes them peakier (fewer near-ties in
  // greedy decoding), smaller makes sampled text more varied.
  float output_gain = 2.0f;
  // > 0: a Gemma-3-shaped model (general.architecture = gemma3: QK and post norms, GELU, scaled
  // embeddings) whose local layers see this many tokens, with a global layer every
  // sliding_window_pattern layers.
  int32_t sliding_window = 0;
  int32_t sliding_window_pattern = 3;
};

inline constexpr int32_t kTinyVocabSize = 300;
inline constexpr int32_t kTinyEndOfText = 0;

// The GGUF file's bytes (version 3, general.architecture = llama, or gemma3 with a window).
std::vector<uint8_t> build_tiny_llama_gguf(const TinyModelOptions& options = {});

// The parsed file (over bytes it owns), the model and the tokenizer, kept alive together.
class TinyModel {
 public:
  static Expected<std::unique_ptr<TinyModel>> create(const TinyModelOptions& options = {});

  ModelWeights& model() { return *model_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const GgufFile& file() const { return *file_; }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  TinyModel() = default;
  std::vector<uint8_t> bytes_;  // the file's bytes: the model's weights point into them
  std::optional<GgufFile> file_;
  std::unique_ptr<ModelWeights> model_;
  std::optional<Tokenizer> tokenizer_;
};

}  // namespace folio::testing
