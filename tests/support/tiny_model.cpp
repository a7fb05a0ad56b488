#include "support/tiny_model.h"
#include "model/gguf_tokenizer.h"

#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "model/gguf_test_writer.h"
#include "quant/formats.h"
#include "text/byte_level.h"

namespace folio::testing {
namespace {

// SplitMix64: the same numbers on every platform and standard library.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform(float lo, float hi) {  // [lo, hi)
    return lo + (hi - lo) * static_cast<float>(next() >> 40) * (1.0f / 16777216.0f);
  }

 private:
  uint64_t state_;
};

// Merges of raw byte strings, highest priority first; each result is a new token. Every part
// is a single byte or the result of an earlier merge.
const std::vector<std::pair<std::string, std::string>>& raw_merges() {
  static const std::vector<std::pair<std::string, std::string>> merges = {
      {"t", "h"},  {"h", "e"},  {"i", "n"},  {"e", "r"},   {"a", "n"},   {"r", "e"},    {"o", "n"},   {" ", "t"},
      {" ", "a"},  {"e", "n"},  {"a", "t"},  {"o", "r"},   {"i", "s"},   {"e", "s"},    {"i", "t"},   {"a", "r"},
      {"o", "u"},  {" ", "s"},  {" ", "o"},  {" ", "w"},   {"l", "l"},   {"e", "d"},    {"n", "d"},   {" ", "b"},
      {" ", "c"},  {" ", "i"},  {"th", "e"}, {" t", "he"}, {"in", "g"},  {"an", "d"},   {" a", "nd"}, {"o", "f"},
      {" o", "f"}, {" i", "n"}, {" i", "s"}, {" i", "t"},  {" w", "it"}, {" wit", "h"}, {" s", "t"},  {" c", "on"},
      {"er", "s"}, {" b", "e"}, {"ou", "t"}};
  return merges;
}

std::string spell(const std::string& raw) {
  std::string out;
  append_byte_level(out, raw);
  return out;
}

// A (rows, cols) matrix of uniform(-scale, scale) values in `type`: GGUF dims {cols, rows}.
std::vector<uint8_t> random_matrix(Random& random, int64_t rows, int64_t cols, float scale, DType type) {
  const DTypeInfo& info = dtype_info(type);
  const size_t row_size = static_cast<size_t>(cols / info.block_elems) * info.block_bytes;
  std::vector<uint8_t> bytes(row_size * static_cast<size_t>(rows));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = random.uniform(-scale, scale);
    const bool ok = quant::quantize_row_reference(type, row.data(), bytes.data() + r * row_size, cols);
    if (!ok) return {};
  }
  return bytes;
}

std::vector<uint8_t> float_bytes(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// Norm weights near 1, so activations keep their scale.
std::vector<uint8_t> norm_vector(Random& random, int64_t size) {
  std::vector<float> values(static_cast<size_t>(size));
  for (float& v : values) v = random.uniform(0.8f, 1.2f);
  return float_bytes(values);
}

}  // namespace

std::vector<uint8_t> build_tiny_llama_gguf(const TinyModelOptions& o) {
  std::vector<std::string> tokens = {"<|endoftext|>"};
  std::vector<int32_t> types = {3};  // control
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(spell(std::string(1, static_cast<char>(b))));
    types.push_back(1);
  }
  std::vector<std::string> merges;
  for (const auto& [left, right] : raw_merges()) {
    merges.push_back(spell(left) + " " + spell(right));
    tokens.push_back(spell(left + right));
    types.push_back(1);
  }

  const int64_t hidden = o.embedding_length;
  const int64_t head_dim = hidden / o.head_count;
  const int64_t q_dim = head_dim * o.head_count;
  const int64_t kv_dim = head_dim * o.head_count_kv;
  const int64_t ffn = o.feed_forward_length;
  const int64_t vocab = static_cast<int64_t>(tokens.size());

  const bool gemma = o.sliding_window > 0;
  const std::string a = gemma ? "gemma3." : "llama.";
  gguf_test::GgufTestWriter writer(3);
  writer.add_string("general.architecture", gemma ? "gemma3" : "llama")
      .add_string("general.name", "folio-tiny-random")
      .add_u32(a + "block_count", static_cast<uint32_t>(o.block_count))
      .add_u32(a + "context_length", static_cast<uint32_t>(o.context_length))
      .add_u32(a + "embedding_length", static_cast<uint32_t>(hidden))
      .add_u32(a + "feed_forward_length", static_cast<uint32_t>(ffn))
      .add_u32(a + "attention.head_count", static_cast<uint32_t>(o.head_count))
      .add_u32(a + "attention.head_count_kv", static_cast<uint32_t>(o.head_count_kv))
      .add_u32(a + "rope.dimension_count", static_cast<uint32_t>(o.rope_dimension_count))
      .add_f32(a + "rope.freq_base", 10000.0f)
      .add_f32(a + "attention.layer_norm_rms_epsilon", 1e-5f)
      .add_string("tokenizer.ggml.model", "gpt2")
      .add_string("tokenizer.ggml.pre", "default")
      .add_string_array("tokenizer.ggml.tokens", tokens)
      .add_i32_array("tokenizer.ggml.token_type", types)
      .add_string_array("tokenizer.ggml.merges", merges)
      .add_u32("tokenizer.ggml.bos_token_id", kTinyEndOfText)
      .add_u32("tokenizer.ggml.eos_token_id", kTinyEndOfText)
      .add_bool("tokenizer.ggml.add_bos_token", false);

  if (gemma) {
    writer.add_u32(a + "attention.sliding_window", static_cast<uint32_t>(o.sliding_window))
        .add_u32(a + "attention.sliding_window_pattern", static_cast<uint32_t>(o.sliding_window_pattern));
  }

  Random random(o.seed);
  const DType w = o.weight_type;
  const float in_scale = 1.0f / std::sqrt(static_cast<float>(hidden));
  writer.add_tensor("token_embd.weight", {static_cast<uint64_t>(hidden), static_cast<uint64_t>(vocab)}, w,
                    random_matrix(random, vocab, hidden, 1.0f, w));
  for (int32_t layer = 0; layer < o.block_count; ++layer) {
    const std::string p = "blk." + std::to_string(layer) + ".";
    auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, float scale) {
      writer.add_tensor(p + name, {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)}, w,
                        random_matrix(random, rows, cols, scale * std::sqrt(3.0f / static_cast<float>(cols)), w));
    };
    writer.add_tensor(p + "attn_norm.weight", {static_cast<uint64_t>(hidden)}, DType::F32, norm_vector(random, hidden));
    matrix("attn_q.weight", q_dim, hidden, 1.0f);
    matrix("attn_k.weight", kv_dim, hidden, 1.0f);
    matrix("attn_v.weight", kv_dim, hidden, 1.0f);
    matrix("attn_output.weight", hidden, q_dim, 0.5f);
    writer.add_tensor(p + "ffn_norm.weight", {static_cast<uint64_t>(hidden)}, DType::F32, norm_vector(random, hidden));
    matrix("ffn_gate.weight", ffn, hidden, 1.0f);
    matrix("ffn_up.weight", ffn, hidden, 1.0f);
    matrix("ffn_down.weight", hidden, ffn, 0.5f);
    if (gemma) {
      writer.add_tensor(p + "attn_q_norm.weight", {static_cast<uint64_t>(head_dim)}, DType::F32,
                        norm_vector(random, head_dim));
      writer.add_tensor(p + "attn_k_norm.weight", {static_cast<uint64_t>(head_dim)}, DType::F32,
                        norm_vector(random, head_dim));
      writer.add_tensor(p + "post_attention_norm.weight", {static_cast<uint64_t>(hidden)}, DType::F32,
                        norm_vector(random, hidden));
      writer.add_tensor(p + "post_ffw_norm.weight", {static_cast<uint64_t>(hidden)}, DType::F32,
                        norm_vector(random, hidden));
    }
  }
  writer.add_tensor("output_norm.weight", {static_cast<uint64_t>(hidden)}, DType::F32, norm_vector(random, hidden));
  // Untied output: logits of std ~ output_gain / sqrt(3) over a normalized hidden state.
  writer.add_tensor("output.weight", {static_cast<uint64_t>(hidden), static_cast<uint64_t>(vocab)}, w,
                    random_matrix(random, vocab, hidden, o.output_gain * in_scale * std::sqrt(3.0f), w));
  return writer.build();
}

Expected<std::unique_ptr<TinyModel>> TinyModel::create(const TinyModelOptions& options) {
  std::unique_ptr<TinyModel> tiny(new TinyModel());
  tiny->bytes_ = build_tiny_llama_gguf(options);
  Expected<GgufFile> file = GgufFile::parse(tiny->bytes_);
  if (!file) return Status::error("tiny model: " + file.error());
  tiny->file_.emplace(std::move(file).value());
  Expected<std::unique_ptr<ModelWeights>> model = ModelWeights::load(*tiny->file_);
  if (!model) return Status::error("tiny model: " + model.error());
  tiny->model_ = std::move(model).value();
  Expected<Tokenizer> tokenizer = tokenizer_from_gguf(*tiny->file_);
  if (!tokenizer) return Status::error("tiny model: " + tokenizer.error());
  tiny->tokenizer_.emplace(std::move(tokenizer).value());
  return Expected<std::unique_ptr<TinyModel>>(std::move(tiny));
}

}  // namespace folio::testing
