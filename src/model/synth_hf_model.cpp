#include "model/synth_hf_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <thread>

#include "core/fp16.h"
#include "core/fp8.h"
#include "model/hf_awq_pack.h"
#include "model/hf_gptq_pack.h"
#include "model/rope_scaling.h"
#include "model/safetensors_writer.h"
#include "quant/gptq.h"

namespace folio {
namespace {

namespace fs = std::filesystem;
using ordered_json = nlohmann::ordered_json;

// Runs body(begin, end) over [0, n) on all cores.
void parallel_rows(int64_t n, const std::function<void(int64_t, int64_t)>& body) {
  const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 64);
  const int64_t per = (n + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (int64_t begin = 0; begin < n; begin += per) pool.emplace_back(body, begin, std::min(n, begin + per));
  for (std::thread& t : pool) t.join();
}

// Weight `index` (synth_model.h's numbering) as float32 rows in Hugging Face's order: with
// heads > 0 (Q, K), stored row h*D + j*D/2 + i holds computed (GGUF) row h*D + 2i + j.
std::vector<float> weight_values(uint64_t seed, uint64_t index, int64_t rows, int64_t cols, int64_t heads) {
  std::vector<float> w(static_cast<size_t>(rows * cols));
  const uint64_t tensor_seed = synth_tensor_seed(seed, index);
  parallel_rows(rows, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      int64_t r = s;
      if (heads > 0) {
        const int64_t d = rows / heads, half = d / 2, h = s / d, within = s % d;
        r = h * d + 2 * (within % half) + within / half;
      }
      synth_fill_row(synth_row_seed(tensor_seed, r), kSynthWeightStd, w.data() + s * cols, cols);
    }
  });
  return w;
}

void to_bf16(const std::vector<float>& w, std::span<uint8_t> out) {
  auto* bits = reinterpret_cast<uint16_t*>(out.data());
  parallel_rows(static_cast<int64_t>(w.size()), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) bits[i] = fp32_to_bf16(w[static_cast<size_t>(i)]);
  });
}

// Round to nearest in groups (quant/gptq.h) on all cores, row blocks merged; act_order: the
// groups gather the inputs in a random order (GPTQ's g_idx), drawn from seed.
quant::Int4Matrix round_to_nearest(const std::vector<float>& w, int64_t rows, int64_t cols,
                                   const quant::Int4Options& options, bool act_order, uint64_t seed) {
  std::vector<int64_t> order(static_cast<size_t>(cols));
  std::iota(order.begin(), order.end(), 0);
  const std::vector<float>* source = &w;
  std::vector<float> permuted;
  if (act_order) {
    std::mt19937_64 rng(seed);
    std::shuffle(order.begin(), order.end(), rng);
    permuted.resize(w.size());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < cols; ++j) permuted[r * cols + j] = w[r * cols + order[j]];
    }
    source = &permuted;
  }
  quant::Int4Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.group_size = options.group_size;
  const int64_t groups = cols / options.group_size;
  m.q.resize(static_cast<size_t>(rows * cols));
  m.scales.resize(static_cast<size_t>(groups * rows));
  m.zeros.resize(m.scales.size());
  m.g_idx.resize(static_cast<size_t>(cols));
  for (int64_t j = 0; j < cols; ++j)
    m.g_idx[static_cast<size_t>(order[j])] = static_cast<int32_t>(j / options.group_size);
  parallel_rows(rows, [&](int64_t begin, int64_t end) {
    const quant::Int4Matrix part = quant::quantize_int4_rtn(source->data() + begin * cols, end - begin, cols, options);
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t j = 0; j < cols; ++j) m.q[r * cols + order[j]] = part.q[(r - begin) * cols + j];
      for (int64_t g = 0; g < groups; ++g) {
        m.scales[g * rows + r] = part.scales[g * (end - begin) + (r - begin)];
        m.zeros[g * rows + r] = part.zeros[g * (end - begin) + (r - begin)];
      }
    }
  });
  return m;
}

// Per output row: scale = max |w| / 448 (E4M3's largest), codes = e4m3(w / scale).
void to_fp8_rows(const std::vector<float>& w, int64_t rows, int64_t cols, std::span<uint8_t> codes,
                 std::vector<float>& scales) {
  scales.assign(static_cast<size_t>(rows), 0.0f);
  parallel_rows(rows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float amax = 0.0f;
      for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
      const float scale = amax > 0.0f ? amax / 448.0f : 1.0f;
      scales[static_cast<size_t>(r)] = scale;
      for (int64_t c = 0; c < cols; ++c) codes[r * cols + c] = fp8_e4m3_from_float(w[r * cols + c] / scale);
    }
  });
}

template <typename T>
void copy_out(const std::vector<T>& v, std::span<uint8_t> out) {
  std::memcpy(out.data(), v.data(), out.size());
}

ordered_json config_json(const SynthConfig& c, const SynthVocabulary& v, int32_t layers, int32_t head_dim) {
  ordered_json j = {{"architectures", {"LlamaForCausalLM"}},
                    {"model_type", "llama"},
                    {"_name_or_path", "folio-synth-" + c.name},
                    {"hidden_size", c.hidden_dim},
                    {"intermediate_size", c.ffn_dim},
                    {"num_attention_heads", c.num_heads},
                    {"num_key_value_heads", c.num_kv_heads},
                    {"num_hidden_layers", layers},
                    {"head_dim", head_dim},
                    {"vocab_size", c.vocab_size},
                    {"max_position_embeddings", c.context_length},
                    {"rms_norm_eps", 1e-5},
                    {"rope_theta", c.rope_freq_base},
                    {"hidden_act", "silu"},
                    {"attention_bias", false},
                    {"mlp_bias", false},
                    {"tie_word_embeddings", c.tied_embeddings},
                    {"bos_token_id", v.bos},
                    {"eos_token_id", v.eos},
                    {"torch_dtype", "bfloat16"}};
  if (c.llama3_rope_scaling) {  // synth_model.cpp's rope_freqs: Llama 3.1's defaults
    const Llama3RopeScaling s;
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", s.factor},
                         {"low_freq_factor", s.low_freq_factor},
                         {"high_freq_factor", s.high_freq_factor},
                         {"original_max_position_embeddings", s.original_max_position_embeddings}};
  }
  return j;
}

// The vocabulary as a `tokenizers` BPE model: byte-level pre-tokenizer and decoder (GPT-2's
// split), control tokens added as specials, BOS prepended where the vocabulary wants it.
ordered_json tokenizer_json(const SynthVocabulary& v) {
  ordered_json added = ordered_json::array(), vocab = ordered_json::object();
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    vocab[v.tokens[id]] = id;
    if (v.types[id] != 3) continue;
    added.push_back({{"id", id},
                     {"content", v.tokens[id]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  ordered_json post = nullptr;
  if (v.add_bos) {
    const std::string& bos = v.tokens[static_cast<size_t>(v.bos)];
    post = {
        {"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair",
         {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
          {{"SpecialToken", {{"id", bos}, {"type_id", 1}}}},
          {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
        {"special_tokens", {{bos, {{"id", bos}, {"ids", {v.bos}}, {"tokens", {bos}}}}}}};
  }
  const ordered_json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", byte_level},
          {"post_processor", post},
          {"decoder", byte_level},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", ""},
            {"end_of_word_suffix", ""},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", v.merges}}}};
}

Status write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) return Status::error("cannot write '" + path.string() + "'");
  return Status::ok();
}

}  // namespace

Status write_synth_hf_model(const SynthConfig& c, const SynthHfOptions& options, const std::string& dir,
                            const std::function<void(uint64_t, uint64_t)>& progress) {
  if (c.architecture != "llama") {
    return Status::error("synth: --format hf writes Llama-family shapes; " + c.name + " is " + c.architecture);
  }
  const int32_t layers = options.num_layers > 0 ? options.num_layers : c.num_layers;
  const int32_t head_dim = c.head_dim > 0 ? c.head_dim : c.hidden_dim / c.num_heads;
  const int64_t hidden = c.hidden_dim, ffn = c.ffn_dim, vocab = c.vocab_size;
  const int64_t q_dim = static_cast<int64_t>(head_dim) * c.num_heads,
                kv_dim = static_cast<int64_t>(head_dim) * c.num_kv_heads;
  const bool fp8 = options.format == SynthHfFormat::kFp8;
  const bool four_bit = options.format != SynthHfFormat::kBf16 && !fp8;
  quant::Int4Options int4;
  int4.group_size = options.group_size;
  int4.symmetric = options.symmetric && options.format != SynthHfFormat::kAwq;
  int4.act_order = options.format == SynthHfFormat::kGptqActOrder;
  if (four_bit) {
    for (int64_t width : {hidden, q_dim, ffn}) {
      if (options.group_size <= 0 || width % options.group_size != 0 || width % 8 != 0) {
        return Status::error("synth: --group-size " + std::to_string(options.group_size) + " does not divide " +
                             c.name + "'s widths (hidden " + std::to_string(hidden) + ", attention " +
                             std::to_string(q_dim) + ", ffn " + std::to_string(ffn) + ")");
      }
    }
  }
  const fs::path out(dir);
  std::error_code ec;
  if (fs::exists(out, ec)) return Status::error("synth: '" + dir + "' exists; give a new folder");
  const fs::path partial = out.parent_path() / (out.filename().string() + ".partial");
  fs::remove_all(partial, ec);
  fs::create_directories(partial, ec);
  if (ec) return Status::error("synth: cannot create '" + partial.string() + "': " + ec.message());

  const SynthVocabulary v = synth_vocabulary(c);
  const uint64_t seed = options.seed;
  std::vector<SafetensorsStreamEntry> entries;
  auto bf16_matrix = [&](const std::string& name, uint64_t index, int64_t rows, int64_t cols) {
    entries.push_back({name, SafetensorsDtype::kBF16, {rows, cols}, [=](std::span<uint8_t> bytes) {
                         to_bf16(weight_values(seed, index, rows, cols, 0), bytes);
                       }});
  };
  auto ones = [&](const std::string& name, int64_t size) {
    entries.push_back({name, SafetensorsDtype::kBF16, {size}, [](std::span<uint8_t> bytes) {
                         auto* bits = reinterpret_cast<uint16_t*>(bytes.data());
                         std::fill(bits, bits + bytes.size() / 2, fp32_to_bf16(1.0f));
                       }});
  };
  // A layer matrix: BF16, or its 4-bit tensors, quantized once when the first is written.
  // order_index: act-order's column order is drawn from this weight's seed, so that the
  // matrices that read one input share it, as GPTQ's (one Hessian) do: Q, K, V and gate, up.
  auto layer_matrix = [&](const std::string& prefix, uint64_t index, int64_t rows, int64_t cols, int64_t heads,
                          uint64_t order_index) {
    if (fp8) {
      auto scales = std::make_shared<std::vector<float>>();
      entries.push_back({prefix + ".weight", SafetensorsDtype::kF8E4M3, {rows, cols}, [=](std::span<uint8_t> bytes) {
                           to_fp8_rows(weight_values(seed, index, rows, cols, heads), rows, cols, bytes, *scales);
                         }});
      entries.push_back({prefix + ".weight_scale", SafetensorsDtype::kF32, {rows, 1}, [=](std::span<uint8_t> bytes) {
                           copy_out(*scales, bytes);
                           scales->clear();
                         }});
      return;
    }
    if (!four_bit) {
      entries.push_back({prefix + ".weight", SafetensorsDtype::kBF16, {rows, cols}, [=](std::span<uint8_t> bytes) {
                           to_bf16(weight_values(seed, index, rows, cols, heads), bytes);
                         }});
      return;
    }
    struct Packed {
      GptqTensors gptq;
      AwqTensors awq;
    };
    auto packed = std::make_shared<Packed>();
    const SynthHfFormat format = options.format;
    auto make = [=](std::span<uint8_t>) {
      const std::vector<float> w = weight_values(seed, index, rows, cols, heads);
      const quant::Int4Matrix m =
          round_to_nearest(w, rows, cols, int4, int4.act_order, synth_tensor_seed(seed, order_index));
      if (format == SynthHfFormat::kAwq) {
        packed->awq = std::move(pack_awq(m)).value();  // the widths were checked above
      } else {
        packed->gptq = std::move(pack_gptq(m)).value();
      }
    };
    const int64_t groups = cols / options.group_size;
    if (format == SynthHfFormat::kAwq) {
      entries.push_back({prefix + ".qweight", SafetensorsDtype::kI32, {cols, rows / 8}, [=](std::span<uint8_t> b) {
                           make(b);
                           copy_out(packed->awq.qweight, b);
                         }});
      entries.push_back({prefix + ".qzeros", SafetensorsDtype::kI32, {groups, rows / 8}, [=](std::span<uint8_t> b) {
                           copy_out(packed->awq.qzeros, b);
                         }});
      entries.push_back({prefix + ".scales", SafetensorsDtype::kF16, {groups, rows}, [=](std::span<uint8_t> b) {
                           copy_out(packed->awq.scales, b);
                           *packed = {};
                         }});
      return;
    }
    entries.push_back({prefix + ".qweight", SafetensorsDtype::kI32, {cols / 8, rows}, [=](std::span<uint8_t> b) {
                         make(b);
                         copy_out(packed->gptq.qweight, b);
                       }});
    entries.push_back({prefix + ".qzeros", SafetensorsDtype::kI32, {groups, rows / 8}, [=](std::span<uint8_t> b) {
                         copy_out(packed->gptq.qzeros, b);
                       }});
    entries.push_back({prefix + ".scales", SafetensorsDtype::kF16, {groups, rows}, [=](std::span<uint8_t> b) {
                         copy_out(packed->gptq.scales, b);
                       }});
    entries.push_back({prefix + ".g_idx", SafetensorsDtype::kI32, {cols}, [=](std::span<uint8_t> b) {
                         copy_out(packed->gptq.g_idx, b);
                         *packed = {};
                       }});
  };

  // synth_model.h's numbering: the embedding 1, layer l's matrices 7l + 2 .. 7l + 8, output last.
  bf16_matrix("model.embed_tokens.weight", 1, vocab, hidden);
  for (int32_t l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const uint64_t base = 7ull * static_cast<uint64_t>(l) + 1;
    ones(p + "input_layernorm.weight", hidden);
    // Q and K rows by head halves, as transformers stores them (GGUF's are interleaved).
    layer_matrix(p + "self_attn.q_proj", base + 1, q_dim, hidden, c.num_heads, base + 1);
    layer_matrix(p + "self_attn.k_proj", base + 2, kv_dim, hidden, c.num_kv_heads, base + 1);
    layer_matrix(p + "self_attn.v_proj", base + 3, kv_dim, hidden, 0, base + 1);
    layer_matrix(p + "self_attn.o_proj", base + 4, hidden, q_dim, 0, base + 4);
    ones(p + "post_attention_layernorm.weight", hidden);
    layer_matrix(p + "mlp.gate_proj", base + 5, ffn, hidden, 0, base + 5);
    layer_matrix(p + "mlp.up_proj", base + 6, ffn, hidden, 0, base + 5);
    layer_matrix(p + "mlp.down_proj", base + 7, hidden, ffn, 0, base + 7);
  }
  ones("model.norm.weight", hidden);
  if (!c.tied_embeddings) bf16_matrix("lm_head.weight", 7ull * static_cast<uint64_t>(layers) + 2, vocab, hidden);

  std::string config = config_json(c, v, layers, head_dim).dump(2);
  Status s = Status::ok();
  if (options.format == SynthHfFormat::kAwq) {
    Expected<std::string> with = awq_config_json(config, int4);
    s = with ? Status::ok() : with.status();
    if (with) config = *with;
  } else if (fp8) {
    nlohmann::json j = nlohmann::json::parse(config);
    j["quantization_config"] = {
        {"quant_method", "compressed-tensors"},
        {"format", "float-quantized"},
        {"config_groups",
         {{"group_0",
           {{"targets", {"Linear"}},
            {"weights", {{"num_bits", 8}, {"type", "float"}, {"strategy", "channel"}, {"symmetric", true}}}}}}},
        {"ignore", {"lm_head"}}};
    config = j.dump(2);
  } else if (four_bit) {
    Expected<std::string> with = gptq_config_json(config, int4, "folio synth: random weights rounded to nearest");
    s = with ? Status::ok() : with.status();
    if (with) config = *with;
  }
  if (s) s = write_text(partial / "config.json", config);
  if (s) s = write_text(partial / "tokenizer.json", tokenizer_json(v).dump());
  if (s) {
    const ordered_json tokenizer_config = {{"bos_token", v.tokens[static_cast<size_t>(v.bos)]},
                                           {"eos_token", v.tokens[static_cast<size_t>(v.eos)]},
                                           {"add_bos_token", v.add_bos},
                                           {"tokenizer_class", "PreTrainedTokenizerFast"}};
    s = write_text(partial / "tokenizer_config.json", tokenizer_config.dump(2));
  }
  if (s) s = write_safetensors_streamed((partial / "model.safetensors").string(), entries, progress);
  if (s) {
    fs::rename(partial, out, ec);
    if (ec) s = Status::error("synth: cannot rename '" + partial.string() + "' to '" + dir + "': " + ec.message());
  }
  if (!s) fs::remove_all(partial, ec);
  return s;
}

}  // namespace folio
