#include "model/synth_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <thread>

#include "core/fp16.h"
#include "model/gguf_writer.h"
#include "model/rope_scaling.h"
#include "quant/formats.h"
#include "text/byte_level.h"

namespace folio {
namespace {

uint64_t mix(uint64_t z) {  // SplitMix64's finaliser: independent streams from any seed
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t synth_tensor_seed(uint64_t seed, uint64_t tensor_index) {
  return mix(seed * 0x100000001B3ull + tensor_index);
}

uint64_t synth_row_seed(uint64_t tensor_seed, int64_t row) {
  return tensor_seed ^ mix(static_cast<uint64_t>(row) + 1);
}

// Uniform: the standard deviation of an N(0, std) init at a fraction of the cost of a normal
// draw (16 GB of weights are drawn per benchmark run).
void synth_fill_row(uint64_t seed, float std_dev, float* row, int64_t n) {
  const float a = std_dev * std::sqrt(3.0f);
  uint64_t state = mix(seed);
  for (int64_t i = 0; i < n; ++i) {
    state += 0x9E3779B97F4A7C15ull;
    const uint64_t r = mix(state);
    row[i] = a * (static_cast<float>(r >> 40) * (2.0f / 16777216.0f) - 1.0f);
  }
}

namespace {

void encode_row(DType type, const float* src, uint8_t* dst, int64_t n) {
  switch (type) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); break;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t b = fp32_to_bf16(src[i]);
        std::memcpy(dst + 2 * i, &b, 2);
      }
      break;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = fp32_to_fp16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      break;
    default: quant::quantize_row_reference(type, src, dst, n); break;
  }
}

// A tensor filler: rows of `cols` values of standard deviation std_dev (or all `constant`
// when std_dev is 0), drawn in parallel; row r's values depend only on (seed, tensor, r).
GgufWriter::TensorFill random_rows(DType type, int64_t cols, float std_dev, uint64_t seed, float constant = 0.0f) {
  return [=](uint64_t offset, std::span<uint8_t> out) {
    const size_t row_size = row_bytes(type, cols);
    const int64_t first_row = static_cast<int64_t>(offset / row_size);
    const int64_t rows = static_cast<int64_t>(out.size() / row_size);
    const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 64);
    auto work = [&](int64_t begin, int64_t end) {
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = begin; r < end; ++r) {
        if (std_dev == 0.0f)
          std::fill(row.begin(), row.end(), constant);
        else
          synth_fill_row(synth_row_seed(seed, first_row + r), std_dev, row.data(), cols);
        encode_row(type, row.data(), out.data() + static_cast<size_t>(r) * row_size, cols);
      }
    };
    std::vector<std::thread> pool;
    const int64_t per = (rows + threads - 1) / threads;
    for (int64_t begin = 0; begin < rows; begin += per) {
      pool.emplace_back(work, begin, std::min(rows, begin + per));
    }
    for (std::thread& t : pool) t.join();
  };
}

GgufWriter::TensorFill float_values(std::vector<float> values) {
  return [values = std::move(values)](uint64_t offset, std::span<uint8_t> out) {
    std::memcpy(out.data(), reinterpret_cast<const uint8_t*>(values.data()) + offset, out.size());
  };
}

std::string spell(const std::string& raw) {
  std::string out;
  append_byte_level(out, raw);
  return out;
}

}  // namespace

// Bytes, then merges of lowercase letter pairs and of a space before each letter (so English
// text takes fewer tokens than bytes), then fillers up to the special tokens.
SynthVocabulary synth_vocabulary(const SynthConfig& c) {
  SynthVocabulary v;
  v.add_bos = c.llama3_vocab;
  auto add = [&](std::string text, int32_t type) {
    v.tokens.push_back(std::move(text));
    v.types.push_back(type);
  };
  const int32_t num_special = c.llama3_vocab ? 256 : 3;
  if (!c.llama3_vocab) {
    add("<|endoftext|>", 3);
    add("<|im_start|>", 3);
    add("<|im_end|>", 3);
    v.bos = 1;
    v.eos = 2;
  }
  for (int b = 0; b < 256; ++b) add(spell(std::string(1, static_cast<char>(b))), 1);
  const int32_t end_of_regular = c.vocab_size - (c.llama3_vocab ? num_special : 0);
  for (char a = 'a'; a <= 'z'; ++a) {
    for (const std::string& left : {std::string(" "), std::string(1, a)}) {
      for (char b = 'a'; b <= 'z'; ++b) {
        if (static_cast<int32_t>(v.tokens.size()) >= end_of_regular) break;
        if (left == " " && b != a) continue;  // " a" .. " z" once each
        const std::string right(1, left == " " ? a : b);
        v.merges.push_back(spell(left) + " " + spell(right));
        add(spell(left + right), 1);
      }
    }
  }
  while (static_cast<int32_t>(v.tokens.size()) < end_of_regular) {
    add("<|synth_filler_" + std::to_string(v.tokens.size()) + "|>", 1);
  }
  if (c.llama3_vocab) {
    const int32_t base = static_cast<int32_t>(v.tokens.size());
    for (int32_t i = 0; i < num_special; ++i) {
      std::string text = "<|reserved_special_token_" + std::to_string(i) + "|>";
      if (i == 0) text = "<|begin_of_text|>";
      if (i == 1) text = "<|end_of_text|>";
      if (i == 9) text = "<|eot_id|>";
      add(std::move(text), 3);
    }
    v.bos = base;
    v.eos = base + 1;
    v.eot = base + 9;
  }
  return v;
}

std::vector<std::string> synth_config_names() {
  return {"smollm2-135m", "llama3-8b", "llama3-70b",  "llama3-70b-1layer",
          "tiny",         "tiny-k256", "gemma3-tiny", "gemma3-270m"};
}

Expected<SynthConfig> synth_config(std::string_view name) {
  SynthConfig c;
  c.name = std::string(name);
  if (name == "smollm2-135m") {
    c.num_layers = 30, c.hidden_dim = 576, c.ffn_dim = 1536, c.num_heads = 9, c.num_kv_heads = 3;
    c.vocab_size = 49152, c.context_length = 8192, c.rope_freq_base = 100000.0f;
    c.tied_embeddings = true;
  } else if (name == "llama3-8b" || name == "llama3-70b" || name == "llama3-70b-1layer") {
    const bool big = name != "llama3-8b";
    c.num_layers = name == "llama3-70b" ? 80 : big ? 1 : 32;
    c.hidden_dim = big ? 8192 : 4096;
    c.ffn_dim = big ? 28672 : 14336;
    c.num_heads = big ? 64 : 32;
    c.num_kv_heads = 8;
    c.vocab_size = 128256, c.context_length = 131072, c.rope_freq_base = 500000.0f;
    c.llama3_rope_scaling = true;
    c.llama3_vocab = true;
  } else if (name == "tiny") {
    c.num_layers = 2, c.hidden_dim = 64, c.ffn_dim = 128, c.num_heads = 4, c.num_kv_heads = 2;
    c.vocab_size = 1024, c.context_length = 2048, c.rope_freq_base = 500000.0f;
    c.llama3_rope_scaling = true;
  } else if (name == "tiny-k256") {
    // tiny with every width a multiple of 256: the K-quants' super-block (Q4_K_M files, tests).
    c.num_layers = 2, c.hidden_dim = 256, c.ffn_dim = 512, c.num_heads = 4, c.num_kv_heads = 2;
    c.vocab_size = 1024, c.context_length = 2048, c.rope_freq_base = 500000.0f;
    c.llama3_rope_scaling = true;
  } else if (name == "gemma3-tiny") {
    // Six layers: five local ones with an 8-token window (smaller than most block sizes, so
    // windows end inside blocks and blocks slide out of them), then a global one.
    c.architecture = "gemma3";
    c.num_layers = 6, c.hidden_dim = 64, c.ffn_dim = 128, c.num_heads = 4, c.num_kv_heads = 1, c.head_dim = 32;
    c.vocab_size = 1024, c.context_length = 2048, c.rope_freq_base = 1000000.0f;
    c.sliding_window = 8;
    c.tied_embeddings = true;
  } else if (name == "gemma3-270m") {
    // Gemma 3 270M's shape (google/gemma-3-270m): head_dim 256, one KV head, a 512-token window.
    c.architecture = "gemma3";
    c.num_layers = 18, c.hidden_dim = 640, c.ffn_dim = 2048, c.num_heads = 4, c.num_kv_heads = 1, c.head_dim = 256;
    c.vocab_size = 262144, c.context_length = 32768, c.rope_freq_base = 1000000.0f;
    c.sliding_window = 512;
    c.tied_embeddings = true;
  } else {
    std::string known;
    for (const std::string& n : synth_config_names()) known += (known.empty() ? "" : ", ") + n;
    return Status::error("unknown synth config '" + std::string(name) + "' (known: " + known + ")");
  }
  return c;
}

Status write_synth_model(const SynthConfig& c, const SynthOptions& options, const std::string& path,
                         const std::function<void(uint64_t, uint64_t)>& progress) {
  const DType w = options.weight_type;
  const DType allowed[] = {DType::BF16, DType::F16,  DType::F32,  DType::Q8_0, DType::Q4_0,
                           DType::Q4_1, DType::Q5_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};
  if (std::find(std::begin(allowed), std::end(allowed), w) == std::end(allowed)) {
    return Status::error("synth: weight type must be bf16, f16, f32, q8_0, q4_0, q4_1, q5_0, q4_k, q5_k or q6_k");
  }
  if (options.q4_k_m && w != DType::Q4_K) return Status::error("synth: the Q4_K_M mix is Q4_K's");
  const int32_t layers = options.num_layers > 0 ? options.num_layers : c.num_layers;
  const int32_t head_dim = c.head_dim > 0 ? c.head_dim : c.hidden_dim / c.num_heads;
  const bool k_quant = w == DType::Q4_K || w == DType::Q5_K || w == DType::Q6_K;
  const int64_t widths[] = {c.hidden_dim, static_cast<int64_t>(head_dim) * c.num_heads, c.ffn_dim};
  if (k_quant && std::any_of(std::begin(widths), std::end(widths), [](int64_t n) { return n % 256 != 0; })) {
    return Status::error("synth: " + std::string(dtype_name(w)) + " needs every matrix width a multiple of 256 (" +
                         c.name + ": hidden " + std::to_string(c.hidden_dim) + ", ffn " + std::to_string(c.ffn_dim) +
                         ")");
  }
  const bool gemma = c.architecture == "gemma3";
  const std::string a = c.architecture + ".";
  const uint64_t hidden = static_cast<uint64_t>(c.hidden_dim);
  const uint64_t q_dim = static_cast<uint64_t>(head_dim) * c.num_heads;
  const uint64_t kv_dim = static_cast<uint64_t>(head_dim) * c.num_kv_heads;
  const uint64_t ffn = static_cast<uint64_t>(c.ffn_dim);
  const uint64_t vocab = static_cast<uint64_t>(c.vocab_size);
  const SynthVocabulary v = synth_vocabulary(c);

  GgufWriter writer;
  writer.add_string("general.architecture", c.architecture)
      .add_string("general.name", "folio-synth-" + c.name)
      .add_u32("general.alignment", 32)
      .add_u32(a + "block_count", static_cast<uint32_t>(layers))
      .add_u32(a + "context_length", static_cast<uint32_t>(c.context_length))
      .add_u32(a + "embedding_length", static_cast<uint32_t>(hidden))
      .add_u32(a + "feed_forward_length", static_cast<uint32_t>(ffn))
      .add_u32(a + "attention.head_count", static_cast<uint32_t>(c.num_heads))
      .add_u32(a + "attention.head_count_kv", static_cast<uint32_t>(c.num_kv_heads))
      .add_u32(a + "attention.key_length", static_cast<uint32_t>(head_dim))
      .add_u32(a + "attention.value_length", static_cast<uint32_t>(head_dim))
      .add_u32(a + "rope.dimension_count", static_cast<uint32_t>(head_dim))
      .add_u32(a + "vocab_size", static_cast<uint32_t>(vocab))
      .add_f32(a + "rope.freq_base", c.rope_freq_base)
      .add_f32(a + "attention.layer_norm_rms_epsilon", 1e-5f)
      .add_string("tokenizer.ggml.model", "gpt2")
      .add_string("tokenizer.ggml.pre", c.llama3_vocab ? "llama-bpe" : "smollm")
      .add_string_array("tokenizer.ggml.tokens", v.tokens)
      .add_i32_array("tokenizer.ggml.token_type", v.types)
      .add_string_array("tokenizer.ggml.merges", v.merges)
      .add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos))
      .add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos))
      .add_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  if (v.eot >= 0) writer.add_u32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(v.eot));
  if (c.sliding_window > 0) writer.add_u32(a + "attention.sliding_window", static_cast<uint32_t>(c.sliding_window));

  uint64_t tensor_index = 0;
  auto seed = [&] { return synth_tensor_seed(options.seed, ++tensor_index); };
  auto matrix = [&](const std::string& name, uint64_t rows, uint64_t cols, DType type) {
    writer.add_tensor(name, {cols, rows}, type, random_rows(type, static_cast<int64_t>(cols), kSynthWeightStd, seed()));
  };
  const DType mixed = options.q4_k_m ? DType::Q6_K : w;  // attn_v, ffn_down, output
  auto norm = [&](const std::string& name, uint64_t size = 0) {
    if (size == 0) size = hidden;
    writer.add_tensor(name, {size}, DType::F32, random_rows(DType::F32, static_cast<int64_t>(size), 0.0f, 0, 1.0f));
  };
  matrix("token_embd.weight", vocab, hidden, w);
  if (c.llama3_rope_scaling) {
    writer.add_tensor("rope_freqs.weight", {static_cast<uint64_t>(head_dim / 2)}, DType::F32,
                      float_values(llama3_rope_freq_factors(head_dim, c.rope_freq_base)));  // Llama 3.1's scaling
  }
  for (int32_t layer = 0; layer < layers; ++layer) {
    const std::string p = "blk." + std::to_string(layer) + ".";
    norm(p + "attn_norm.weight");
    matrix(p + "attn_q.weight", q_dim, hidden, w);
    matrix(p + "attn_k.weight", kv_dim, hidden, w);
    matrix(p + "attn_v.weight", kv_dim, hidden, mixed);
    matrix(p + "attn_output.weight", hidden, q_dim, w);
    norm(p + "ffn_norm.weight");
    matrix(p + "ffn_gate.weight", ffn, hidden, w);
    matrix(p + "ffn_up.weight", ffn, hidden, w);
    matrix(p + "ffn_down.weight", hidden, ffn, mixed);
    if (gemma) {
      norm(p + "attn_q_norm.weight", static_cast<uint64_t>(head_dim));
      norm(p + "attn_k_norm.weight", static_cast<uint64_t>(head_dim));
      norm(p + "post_attention_norm.weight");
      norm(p + "post_ffw_norm.weight");
    }
  }
  norm("output_norm.weight");
  if (!c.tied_embeddings) matrix("output.weight", vocab, hidden, mixed);
  return writer.write(path, progress);
}

}  // namespace folio
