#include "cli/quantize_int4.h"

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include <unistd.h>

#include "backend/cpu/activation_stats.h"
#include "cli/layerwise_calibration.h"
#include "core/fp16.h"
#include "model/hf_awq_pack.h"
#include "model/hf_checkpoint.h"
#include "model/hf_config.h"
#include "model/hf_gptq_pack.h"
#include "model/hf_quantization.h"
#include "model/safetensors_writer.h"
#include "quant/awq.h"
#include "quant/dense_blas.h"

namespace folio::cli {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

template <typename T>
std::span<const uint8_t> bytes_of(const std::vector<T>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T)};
}

// Which matrix input feeds a layer's linear (the activation statistics' sites).
cpu::MatrixInput input_of(const std::string& linear) {
  if (linear == "self_attn.o_proj") return cpu::MatrixInput::kAttentionOutput;
  if (linear == "mlp.down_proj") return cpu::MatrixInput::kFfnHidden;
  if (linear == "mlp.gate_proj" || linear == "mlp.up_proj") return cpu::MatrixInput::kFfn;
  return cpu::MatrixInput::kAttention;
}

// "<base>layers.<N>.<linear>.weight" for the seven layer matrices (no std::regex: GCC 12 warns
// inside its automaton at -O1, which the sanitizer build turns into an error).
struct LinearName {
  std::string prefix;  // everything before ".weight"
  std::string base;    // "<...>layers.<N>."
  int32_t layer = 0;
  std::string linear;  // "self_attn.q_proj", ...
};

std::optional<LinearName> parse_linear(const std::string& name) {
  static const char* const kLinears[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                         "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};
  const std::string suffix = ".weight";
  if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return std::nullopt;
  }
  const size_t at = name.rfind("layers.");
  if (at == std::string::npos || (at > 0 && name[at - 1] != '.')) return std::nullopt;
  size_t digits = at + 7, end = digits;
  while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
  if (end == digits || end >= name.size() || name[end] != '.') return std::nullopt;
  LinearName n;
  n.prefix = name.substr(0, name.size() - suffix.size());
  n.base = name.substr(0, end + 1);
  n.layer = std::stoi(name.substr(digits, end - digits));
  n.linear = n.prefix.substr(end + 1);
  for (const char* l : kLinears) {
    if (n.linear == l) return n;
  }
  return std::nullopt;
}

using Method = Int4QuantizeRequest::Method;
using Overrides = std::map<std::string, std::vector<float>>;

// AWQ on layer `layer` (its tensors named "<base>..."): the scales of Q|K|V, gate|up, down (and
// O when V feeds it head for head, no GQA), applied: the matrices' columns multiplied, the
// RMSNorm weights and up's rows divided; then the clipping search. The changed tensors go into
// `out` by name.
Status awq_scale_layer(const HfCheckpoint& in, const cpu::ActivationStats& stats, const std::string& base,
                       int32_t layer, const quant::Int4Options& options, bool one_plus_norms, bool clip, bool quiet,
                       Overrides& out) {
  auto tensor = [&](const std::string& name) -> std::vector<float>& {
    auto it = out.find(name);
    if (it == out.end()) {
      const HfCheckpoint::Entry e = in.find(name);
      it = out.emplace(name, e.tensor ? hf_tensor_floats(e) : std::vector<float>{}).first;
    }
    return it->second;
  };
  const auto start = std::chrono::steady_clock::now();
  {
    // One input's readers; `fold` divides the activation where it is made: a norm's weight
    // (norm_rows == 0) or rows of a matrix.
    auto scale_group = [&](cpu::MatrixInput input, const std::vector<std::string>& linears,
                           const std::string& fold) -> Status {
      const std::vector<float> ms = stats.mean_squares(input, layer);
      const std::vector<double>& gram = stats.gram(input, layer);
      const auto cols = static_cast<int64_t>(ms.size());
      std::vector<quant::AwqMatrix> matrices;
      for (const std::string& l : linears) {
        std::vector<float>& w = tensor(base + l + ".weight");
        if (w.empty() || static_cast<int64_t>(w.size()) % cols != 0) {
          return Status::error("AWQ: '" + base + l + ".weight' does not read an input of " + std::to_string(cols));
        }
        matrices.push_back({w.data(), static_cast<int64_t>(w.size()) / cols});
      }
      std::vector<float> rms(ms.size());
      for (size_t i = 0; i < ms.size(); ++i) rms[i] = std::sqrt(ms[i]);
      const auto search_start = std::chrono::steady_clock::now();
      const quant::AwqScales s =
          quant::awq_search_scales(matrices, cols, rms, gram.data(), options, stats.inputs(input, layer));
      const auto clip_start = std::chrono::steady_clock::now();
      for (const std::string& l : linears) {
        std::vector<float>& w = tensor(base + l + ".weight");
        for (size_t i = 0; i < w.size(); ++i) w[i] *= s.s[i % static_cast<size_t>(cols)];
      }
      std::vector<float>& f = tensor(fold);
      if (f.size() == static_cast<size_t>(cols)) {  // a norm
        for (int64_t c = 0; c < cols; ++c) {
          f[static_cast<size_t>(c)] = one_plus_norms
                                          ? (1.0f + f[static_cast<size_t>(c)]) / s.s[static_cast<size_t>(c)] - 1.0f
                                          : f[static_cast<size_t>(c)] / s.s[static_cast<size_t>(c)];
        }
      } else {  // rows of a matrix: row c makes channel c
        const size_t row = f.size() / static_cast<size_t>(cols);
        for (size_t i = 0; i < f.size(); ++i) f[i] /= s.s[i / row];
      }
      // The clipping search, on the scaled weights; not for q and k (AutoAWQ leaves them: their
      // error passes through the softmax, which the output error here does not see).
      quant::AwqClip clipped;
      for (const std::string& l : linears) {
        if (!clip || l == "self_attn.q_proj" || l == "self_attn.k_proj") continue;
        std::vector<float>& w = tensor(base + l + ".weight");
        if (cols % options.group_size != 0) break;  // write_checkpoint names the problem
        const quant::AwqClip c =
            quant::awq_clip(w.data(), static_cast<int64_t>(w.size()) / cols, cols, s.s, gram.data(), options);
        clipped.error += c.error;
        clipped.error_unclipped += c.error_unclipped;
        clipped.groups += c.groups;
        clipped.clipped += c.clipped;
      }
      if (!quiet) {
        const auto now = std::chrono::steady_clock::now();
        auto seconds_from = [&](std::chrono::steady_clock::time_point t) {
          return std::chrono::duration<double>(now - t).count();
        };
        const double search_s = std::chrono::duration<double>(clip_start - search_start).count();
        std::fprintf(stderr, "awq layer %d %-28s alpha %.2f, output error %.3g of round to nearest's", layer,
                     linears.front().c_str(), s.alpha, s.error_unscaled > 0.0 ? s.error / s.error_unscaled : 1.0);
        if (clipped.groups > 0) {
          std::fprintf(stderr, "; clipped %lld of %lld groups, their error %.3g of unclipped",
                       static_cast<long long>(clipped.clipped), static_cast<long long>(clipped.groups),
                       clipped.error_unclipped > 0.0 ? clipped.error / clipped.error_unclipped : 1.0);
        }
        std::fprintf(stderr, "  (scales %.1f s, clipping %.1f s; layer %.1f s)\n", search_s, seconds_from(clip_start),
                     seconds_from(start));
      }
      return Status::ok();
    };
    const std::string ffn_norm = in.find(base + "pre_feedforward_layernorm.weight").tensor != nullptr
                                     ? base + "pre_feedforward_layernorm.weight"
                                     : base + "post_attention_layernorm.weight";
    if (Status st =
            scale_group(cpu::MatrixInput::kAttention, {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"},
                        base + "input_layernorm.weight");
        !st) {
      return st;
    }
    if (Status st = scale_group(cpu::MatrixInput::kFfn, {"mlp.gate_proj", "mlp.up_proj"}, ffn_norm); !st) return st;
    if (Status st = scale_group(cpu::MatrixInput::kFfnHidden, {"mlp.down_proj"}, base + "mlp.up_proj.weight"); !st) {
      return st;
    }
    const HfCheckpoint::Entry v = in.find(base + "self_attn.v_proj.weight"),
                              o = in.find(base + "self_attn.o_proj.weight");
    if (v.tensor && o.tensor && v.tensor->shape[0] == o.tensor->shape[1]) {
      if (Status st =
              scale_group(cpu::MatrixInput::kAttentionOutput, {"self_attn.o_proj"}, base + "self_attn.v_proj.weight");
          !st) {
        return st;
      }
    }
  }
  return Status::ok();
}

// "<...>layers.<N>." of each layer N, from its q_proj's name; empty where a layer has none.
std::vector<std::string> layer_bases(const HfCheckpoint& in) {
  std::vector<std::string> bases;
  for (const std::string& name : in.tensor_names()) {
    const std::optional<LinearName> q = parse_linear(name);
    if (!q || q->linear != "self_attn.q_proj") continue;
    if (static_cast<size_t>(q->layer) >= bases.size()) bases.resize(static_cast<size_t>(q->layer) + 1);
    bases[static_cast<size_t>(q->layer)] = q->base;
  }
  return bases;
}

// One matrix quantized by GPTQ while the calibration walks the layers, written after.
struct GptqResult {
  std::unique_ptr<GptqTensors> packed;
  double weight_error = 0.0;  // |w - wq| / |w|, for the progress line
};
using GptqResults = std::map<std::string, GptqResult>;  // by the matrix's prefix

// The relative error of a matrix's quantized weights (GPTQ trades it for the output's error:
// larger here than round to nearest, smaller where it counts).
double weight_error(const std::vector<float>& w, const std::vector<float>& wq) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < w.size(); ++i) {
    num += (static_cast<double>(w[i]) - wq[i]) * (static_cast<double>(w[i]) - wq[i]);
    den += static_cast<double>(w[i]) * w[i];
  }
  return den > 0.0 ? std::sqrt(num / den) : 0.0;
}

// GPTQ on layer `layer`'s seven matrices with that layer's statistics, packed into `results`;
// `replacement` (a copy of the calibration model's layer) gets their quantized values as F32
// matrices in computing order, held in `values`, for the layers after it to run on.
Status gptq_layer(const Int4QuantizeRequest& r, const HfCheckpoint& in, const std::string& base, int32_t layer,
                  const cpu::ActivationStats& stats, const ModelConfig& config, GptqResults& results,
                  LayerWeights& replacement, std::vector<std::vector<float>>& values,
                  std::chrono::steady_clock::time_point start) {
  // Q and K rows of Llama-layout models are computed in GGUF's order (model/hf_weights.cpp).
  const bool interleave = config.rope_style == RopeStyle::kAdjacentPairs && config.architecture != "gemma3";
  const struct {
    const char* linear;
    WeightTensor LayerWeights::*member;
    int32_t heads;
  } matrices[] = {{"self_attn.q_proj", &LayerWeights::q, interleave ? config.num_heads : 0},
                  {"self_attn.k_proj", &LayerWeights::k, interleave ? config.num_kv_heads : 0},
                  {"self_attn.v_proj", &LayerWeights::v, 0},
                  {"self_attn.o_proj", &LayerWeights::o, 0},
                  {"mlp.gate_proj", &LayerWeights::gate, 0},
                  {"mlp.up_proj", &LayerWeights::up, 0},
                  {"mlp.down_proj", &LayerWeights::down, 0}};
  for (const auto& m : matrices) {
    const std::string prefix = base + m.linear;
    const HfCheckpoint::Entry e = in.find(prefix + ".weight");
    if (e.tensor == nullptr || e.tensor->shape.size() != 2) {
      return Status::error("no matrix '" + prefix + ".weight' to quantize");
    }
    const int64_t rows = e.tensor->shape[0], cols = e.tensor->shape[1];
    const std::vector<double>& gram = stats.gram(input_of(m.linear), layer);
    if (static_cast<int64_t>(gram.size()) != cols * cols) {
      return Status::error("no calibration statistics of the right width for '" + prefix + ".weight'");
    }
    const std::vector<float> w = hf_tensor_floats(e);
    const quant::Int4Matrix q = quant::quantize_int4_gptq(w.data(), rows, cols, gram.data(), r.options);
    if (q.q.empty()) {
      return Status::error("'" + prefix + ".weight' (" + std::to_string(cols) +
                           " inputs) cannot be quantized by GPTQ: its inputs are not a multiple of --group-size " +
                           std::to_string(r.options.group_size) +
                           ", or its calibration Gram matrix stays indefinite however much it is damped");
    }
    Expected<GptqTensors> packed = pack_gptq(q);
    if (!packed) return Status::error("'" + prefix + ".weight': " + packed.error());
    const std::vector<float> wq = q.dequantize();
    GptqResult& result = results[prefix];
    result.packed = std::make_unique<GptqTensors>(std::move(packed).value());
    result.weight_error = weight_error(w, wq);
    if (!r.quiet) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::fprintf(stderr, "gptq %-48s %lld x %lld, weight error %.4f  (%.1f s)\n", prefix.c_str(),
                   static_cast<long long>(rows), static_cast<long long>(cols), result.weight_error, seconds);
    }
    // Computed row i is stored row order.stored_row(i) (WeightTensor::interleave_heads).
    WeightTensor order;
    order.rows = rows;
    order.interleave_heads = m.heads;
    std::vector<float>& v = values.emplace_back(wq.size());
    for (int64_t i = 0; i < rows; ++i) {
      std::copy_n(wq.begin() + order.stored_row(i) * cols, cols, v.begin() + i * cols);
    }
    replacement.*m.member = WeightTensor{DType::F32, rows, cols, v.data()};
  }
  return Status::ok();
}

// Every tensor into dir: the layer matrices as GPTQ made them (gptq, from the calibration) or
// rounded to nearest (int4; awq on its scaled weights in `overrides`), the rest in fp16.
Status write_checkpoint(const Int4QuantizeRequest& r, const HfCheckpoint& in, const std::string& config_text,
                        GptqResults& gptq, const Overrides& overrides, const fs::path& dir) {
  std::vector<SafetensorsEntry> entries;
  std::vector<std::unique_ptr<GptqTensors>> packed;
  std::vector<std::unique_ptr<AwqTensors>> packed_awq;
  std::vector<std::vector<uint16_t>> converted;
  const std::vector<std::string> names = in.tensor_names();
  const auto start = std::chrono::steady_clock::now();
  size_t done = 0, quantized = 0;
  double error_sum = 0.0;
  for (const std::string& name : names) {
    ++done;
    const HfCheckpoint::Entry e = in.find(name);
    const std::optional<LinearName> linear = parse_linear(name);
    const auto overridden = overrides.find(name);
    const bool is_float = e.tensor->dtype == SafetensorsDtype::kF32 || e.tensor->dtype == SafetensorsDtype::kF16 ||
                          e.tensor->dtype == SafetensorsDtype::kBF16;
    if (linear && e.tensor->shape.size() == 2 && is_float) {
      const std::string& prefix = linear->prefix;
      const int32_t layer = linear->layer;
      const int64_t rows = e.tensor->shape[0], cols = e.tensor->shape[1];
      const int64_t groups = r.options.group_size > 0 ? cols / r.options.group_size : 0;
      quant::Int4Matrix m;
      double error = 0.0;
      if (r.method == Method::kGptq) {
        const auto made = gptq.find(prefix);
        if (made == gptq.end()) return Status::error("layer " + std::to_string(layer) + " was not calibrated: " + name);
        packed.push_back(std::move(made->second.packed));
        error = made->second.weight_error;
      } else {
        const std::vector<float> w = overridden != overrides.end() ? overridden->second : hf_tensor_floats(e);
        m = quant::quantize_int4_rtn(w.data(), rows, cols, r.options);
        if (m.q.empty()) {
          return Status::error("'" + name + "' has " + std::to_string(cols) +
                               " inputs, not a multiple of --group-size " + std::to_string(r.options.group_size));
        }
        error = weight_error(w, m.dequantize());
      }
      error_sum += error;
      ++quantized;
      if (r.method == Method::kAwq) {
        Expected<AwqTensors> p = pack_awq(m);
        if (!p) return Status::error("'" + name + "': " + p.error());
        packed_awq.push_back(std::make_unique<AwqTensors>(std::move(p).value()));
        const AwqTensors& t = *packed_awq.back();
        entries.push_back({prefix + ".qweight", SafetensorsDtype::kI32, {cols, rows / 8}, bytes_of(t.qweight)});
        entries.push_back({prefix + ".qzeros", SafetensorsDtype::kI32, {groups, rows / 8}, bytes_of(t.qzeros)});
        entries.push_back({prefix + ".scales", SafetensorsDtype::kF16, {groups, rows}, bytes_of(t.scales)});
      } else {
        if (r.method != Method::kGptq) {
          Expected<GptqTensors> p = pack_gptq(m);
          if (!p) return Status::error("'" + name + "': " + p.error());
          packed.push_back(std::make_unique<GptqTensors>(std::move(p).value()));
        }
        const GptqTensors& t = *packed.back();
        entries.push_back({prefix + ".qweight", SafetensorsDtype::kI32, {cols / 8, rows}, bytes_of(t.qweight)});
        entries.push_back({prefix + ".qzeros", SafetensorsDtype::kI32, {groups, rows / 8}, bytes_of(t.qzeros)});
        entries.push_back({prefix + ".scales", SafetensorsDtype::kF16, {groups, rows}, bytes_of(t.scales)});
        entries.push_back({prefix + ".g_idx", SafetensorsDtype::kI32, {cols}, bytes_of(t.g_idx)});
      }
      if (!r.quiet && r.method != Method::kGptq) {  // GPTQ's lines came as the calibration made them
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::fprintf(stderr, "[%zu/%zu] %-48s %s %lld x %lld, weight error %.4f  (%.1f s)\n", done, names.size(),
                     prefix.c_str(),
                     r.method == Method::kGptq  ? "gptq"
                     : r.method == Method::kAwq ? "awq"
                                                : "int4",
                     static_cast<long long>(rows), static_cast<long long>(cols), error, seconds);
      }
    } else if (is_float && (e.tensor->dtype != SafetensorsDtype::kF16 || overridden != overrides.end())) {
      // Everything else in fp16, the dtype GPTQ and AWQ checkpoints carry (AWQ's folded norms).
      const std::vector<float> v = overridden != overrides.end() ? overridden->second : hf_tensor_floats(e);
      std::vector<uint16_t> h(v.size());
      for (size_t i = 0; i < v.size(); ++i) h[i] = fp32_to_fp16(v[i]);
      converted.push_back(std::move(h));
      entries.push_back({name, SafetensorsDtype::kF16, e.tensor->shape, bytes_of(converted.back())});
    } else {
      entries.push_back({name, e.tensor->dtype, e.tensor->shape, e.file->data(*e.tensor)});
    }
  }
  if (quantized == 0) return Status::error("no layer matrices (model.layers.N.self_attn.q_proj.weight, ...) found");
  if (!r.quiet) {
    std::fprintf(stderr, "quantized %zu matrices, mean relative weight error %.4f\n", quantized,
                 error_sum / static_cast<double>(quantized));
  }
  if (Status s = write_safetensors((dir / "model.safetensors").string(), entries); !s) return s;
  Expected<std::string> config =
      r.method == Method::kAwq
          ? awq_config_json(config_text, r.options)
          : gptq_config_json(config_text, r.options, r.method == Method::kGptq ? "gptq" : "round to nearest");
  if (!config) return config.status();
  std::ofstream(dir / "config.json", std::ios::binary) << *config;
  // Tokenizer, chat template, generation config: as they are.
  for (const fs::directory_entry& f : fs::directory_iterator(r.input)) {
    const std::string file = f.path().filename().string();
    if (!f.is_regular_file() || file == "config.json" || file == "model.safetensors.index.json" ||
        f.path().extension() == ".safetensors") {
      continue;
    }
    std::error_code ec;
    fs::copy_file(f.path(), dir / file, fs::copy_options::overwrite_existing, ec);
    if (ec) return Status::error("cannot copy '" + f.path().string() + "': " + ec.message());
  }
  return Status::ok();
}

// gptq / awq: the calibration text through the model layer by layer (layerwise_calibration.h),
// each layer quantized (GPTQ, into gptq; the layers after it then read its quantized outputs)
// or scaled and clipped (AWQ, into overrides) as soon as its statistics are in. Returns the
// exit code: 0, 1 (a model problem) or 2 (the calibration text), having said why.
int calibrate(const Int4QuantizeRequest& r, const HfCheckpoint& in, const std::string& config_text, GptqResults& gptq,
              Overrides& overrides) {
  // One layer's Gram matrices at a time: width^2 doubles for each of its four inputs.
  if (Expected<HfModelConfig> hf = parse_hf_config(config_text); hf) {
    const ModelConfig& c = hf->config;
    const double bytes = 8.0 * (2.0 * c.hidden_dim * c.hidden_dim + static_cast<double>(c.q_dim()) * c.q_dim() +
                                static_cast<double>(c.ffn_dim) * c.ffn_dim);
    const double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
    if (bytes > 0.5 * memory) {
      std::fprintf(stderr,
                   "folio quantize: one layer's calibration statistics (its inputs' Gram matrices) need %.1f GiB, "
                   "more than half of this machine's %.1f GiB\n",
                   bytes / (1 << 30), memory / (1 << 30));
      return 1;
    }
  }
  Expected<std::unique_ptr<LayerwiseCalibration>> opened =
      LayerwiseCalibration::open(r.input, r.calibration_text, r.calibration_tokens, r.threads, r.quiet);
  if (!opened) {
    std::fprintf(stderr, "folio quantize: %s\n", opened.error().c_str());
    return 2;
  }
  LayerwiseCalibration& calibration = **opened;
  quant::dense::set_threads(r.threads);  // GPTQ's factorizations and the Gram matrices
  if (!r.quiet) std::fprintf(stderr, "calibration: linear algebra in %s\n", quant::dense::library_name());
  const std::vector<std::string> bases = layer_bases(in);
  // Gemma's RMSNorm multiplies by (1 + weight): AWQ's scale folds into that sum.
  const bool one_plus = config_text.find("\"gemma") != std::string::npos;
  const auto start = std::chrono::steady_clock::now();
  for (int32_t l = 0; l < calibration.num_layers(); ++l) {
    if (static_cast<size_t>(l) >= bases.size() || bases[static_cast<size_t>(l)].empty()) {
      std::fprintf(stderr, "folio quantize: layer %d has no self_attn.q_proj.weight\n", l);
      return 1;
    }
    const std::string& base = bases[static_cast<size_t>(l)];
    const std::unique_ptr<cpu::ActivationStats> stats = calibration.collect(l, r.method == Method::kAwq);
    Status s = Status::ok();
    if (r.method == Method::kGptq) {
      LayerWeights replacement = calibration.weights().layers()[static_cast<size_t>(l)];
      std::vector<std::vector<float>> values;
      s = gptq_layer(r, in, base, l, *stats, calibration.weights().config(), gptq, replacement, values, start);
      if (s) calibration.advance(l, &replacement);
    } else {
      s = awq_scale_layer(in, *stats, base, l, r.options, one_plus, r.awq_clip, r.quiet, overrides);
      if (s) calibration.advance(l, nullptr);
    }
    if (!s) {
      std::fprintf(stderr, "folio quantize: %s\n", s.message().c_str());
      return 1;
    }
    if (!r.quiet) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::fprintf(stderr, "calibration: layer %d/%d %s over %d chunks of 512 tokens  (%.1f s)\n", l + 1,
                   calibration.num_layers(), r.method == Method::kGptq ? "quantized by GPTQ" : "scaled by AWQ",
                   calibration.num_chunks(), seconds);
    }
  }
  return 0;
}

}  // namespace

int quantize_hf_int4(const Int4QuantizeRequest& r) {
  std::error_code ec;
  if (!is_hf_model_dir(r.input)) {
    std::fprintf(stderr,
                 "folio quantize: --type %s reads a Hugging Face directory (config.json and safetensors); '%s' is "
                 "not one\n",
                 r.method == Method::kGptq  ? "gptq"
                 : r.method == Method::kAwq ? "awq"
                                            : "int4",
                 r.input.c_str());
    return 2;
  }
  if (r.method != Method::kRoundToNearest && r.calibration_text.empty()) {
    std::fprintf(stderr, "folio quantize: --type %s needs --calibration-text (the inputs whose outputs it keeps)\n",
                 r.method == Method::kGptq ? "gptq" : "awq");
    return 2;
  }
  const fs::path out(r.output);
  if (fs::exists(out, ec)) {
    std::fprintf(stderr, "folio quantize: '%s' exists; give a new folder\n", r.output.c_str());
    return 2;
  }
  const std::string config_text = read_text(fs::path(r.input) / "config.json");
  Expected<HfQuantization> existing = read_hf_quantization(r.input, config_text);
  if (!existing) {
    std::fprintf(stderr, "folio quantize: %s\n", existing.error().c_str());
    return 1;
  }
  if (existing->method != HfQuantization::Method::kNone) {
    std::fprintf(stderr, "folio quantize: '%s' is already quantized (%s); give its F32 / F16 / BF16 weights\n",
                 r.input.c_str(), existing->description.c_str());
    return 2;
  }
  Expected<HfCheckpoint> checkpoint = HfCheckpoint::open(r.input);
  if (!checkpoint) {
    std::fprintf(stderr, "folio quantize: %s\n", checkpoint.error().c_str());
    return 1;
  }
  const fs::path partial = out.parent_path() / (out.filename().string() + ".partial");
  fs::remove_all(partial, ec);
  fs::create_directories(partial, ec);
  if (ec) {
    std::fprintf(stderr, "folio quantize: cannot create '%s': %s\n", partial.c_str(), ec.message().c_str());
    return 1;
  }
  GptqResults gptq;
  Overrides overrides;
  Status s = Status::ok();
  if (r.method != Method::kRoundToNearest) {
    if (const int code = calibrate(r, *checkpoint, config_text, gptq, overrides); code != 0) {
      fs::remove_all(partial, ec);
      return code;
    }
  }
  if (s) s = write_checkpoint(r, *checkpoint, config_text, gptq, overrides, partial);
  if (s) {
    fs::rename(partial, out, ec);
    if (ec) s = Status::error("cannot rename '" + partial.string() + "' to '" + out.string() + "': " + ec.message());
  }
  if (!s) {
    fs::remove_all(partial, ec);
    std::fprintf(stderr, "folio quantize: %s\n", s.message().c_str());
    return 1;
  }
  if (!r.quiet) std::fprintf(stderr, "folio quantize: wrote %s\n", out.c_str());
  return 0;
}

}  // namespace folio::cli
