#include "cli/quantize_int4.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>

#include "backend/cpu/activation_stats.h"
#include "cli/importance_matrix.h"
#include "core/fp16.h"
#include "model/hf_checkpoint.h"
#include "model/hf_gptq_pack.h"
#include "model/hf_quantization.h"
#include "model/safetensors_writer.h"

namespace folio::cli {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// A tensor of F32 / F16 / BF16 as floats; empty for other dtypes.
std::vector<float> to_floats(const HfCheckpoint::Entry& e) {
  const std::span<const uint8_t> bytes = e.file->data(*e.tensor);
  const auto n = static_cast<size_t>(e.tensor->num_elements());
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    switch (e.tensor->dtype) {
      case SafetensorsDtype::kF32: std::memcpy(&out[i], bytes.data() + 4 * i, 4); break;
      case SafetensorsDtype::kF16:
      case SafetensorsDtype::kBF16: {
        uint16_t bits;
        std::memcpy(&bits, bytes.data() + 2 * i, 2);
        out[i] = e.tensor->dtype == SafetensorsDtype::kF16 ? fp16_to_fp32(bits) : bf16_to_fp32(bits);
        break;
      }
      default: return {};
    }
  }
  return out;
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

Status write_checkpoint(const Int4QuantizeRequest& r, const HfCheckpoint& in, const std::string& config_text,
                        const cpu::ActivationStats* stats, const fs::path& dir) {
  static const std::regex kLinear(
      R"(^(.*\blayers\.(\d+)\.(self_attn\.[qkvo]_proj|mlp\.(?:gate|up|down)_proj))\.weight$)");
  std::vector<SafetensorsEntry> entries;
  std::vector<std::unique_ptr<GptqTensors>> packed;
  std::vector<std::vector<uint16_t>> converted;
  const std::vector<std::string> names = in.tensor_names();
  const auto start = std::chrono::steady_clock::now();
  size_t done = 0, quantized = 0;
  double error_sum = 0.0;
  for (const std::string& name : names) {
    ++done;
    const HfCheckpoint::Entry e = in.find(name);
    std::smatch match;
    const bool is_float = e.tensor->dtype == SafetensorsDtype::kF32 || e.tensor->dtype == SafetensorsDtype::kF16 ||
                          e.tensor->dtype == SafetensorsDtype::kBF16;
    if (std::regex_match(name, match, kLinear) && e.tensor->shape.size() == 2 && is_float) {
      const std::string prefix = match[1];
      const int32_t layer = std::stoi(match[2]);
      const int64_t rows = e.tensor->shape[0], cols = e.tensor->shape[1];
      const std::vector<float> w = to_floats(e);
      quant::Int4Matrix m;
      if (stats != nullptr) {
        const std::vector<double>& gram = stats->gram(input_of(match[3]), layer);
        if (static_cast<int64_t>(gram.size()) != cols * cols) {
          return Status::error("no calibration statistics of the right width for '" + name + "'");
        }
        m = quant::quantize_int4_gptq(w.data(), rows, cols, gram.data(), r.options);
      } else {
        m = quant::quantize_int4_rtn(w.data(), rows, cols, r.options);
      }
      if (m.q.empty()) {
        return Status::error("'" + name + "' has " + std::to_string(cols) + " inputs, not a multiple of --group-size " +
                             std::to_string(r.options.group_size));
      }
      // The relative error of the weights, for the progress line (GPTQ trades it for the
      // output's error: larger here than round to nearest, smaller where it counts).
      const std::vector<float> wq = m.dequantize();
      double num = 0.0, den = 0.0;
      for (size_t i = 0; i < w.size(); ++i) {
        num += (static_cast<double>(w[i]) - wq[i]) * (static_cast<double>(w[i]) - wq[i]);
        den += static_cast<double>(w[i]) * w[i];
      }
      error_sum += den > 0.0 ? std::sqrt(num / den) : 0.0;
      ++quantized;
      Expected<GptqTensors> p = pack_gptq(m);
      if (!p) return Status::error("'" + name + "': " + p.error());
      packed.push_back(std::make_unique<GptqTensors>(std::move(p).value()));
      const GptqTensors& t = *packed.back();
      const int64_t groups = m.groups();
      entries.push_back({prefix + ".qweight", SafetensorsDtype::kI32, {cols / 8, rows}, bytes_of(t.qweight)});
      entries.push_back({prefix + ".qzeros", SafetensorsDtype::kI32, {groups, rows / 8}, bytes_of(t.qzeros)});
      entries.push_back({prefix + ".scales", SafetensorsDtype::kF16, {groups, rows}, bytes_of(t.scales)});
      entries.push_back({prefix + ".g_idx", SafetensorsDtype::kI32, {cols}, bytes_of(t.g_idx)});
      if (!r.quiet) {
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::fprintf(stderr, "[%zu/%zu] %-48s %s %lld x %lld, weight error %.4f  (%.1f s)\n", done, names.size(),
                     prefix.c_str(), stats ? "gptq" : "int4", static_cast<long long>(rows),
                     static_cast<long long>(cols), den > 0.0 ? std::sqrt(num / den) : 0.0, seconds);
      }
    } else if (is_float && e.tensor->dtype != SafetensorsDtype::kF16) {
      // Everything else in fp16, the dtype GPTQ checkpoints carry.
      const std::vector<float> v = to_floats(e);
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
  Expected<std::string> config = gptq_config_json(config_text, r.options, r.gptq ? "gptq" : "round to nearest");
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

}  // namespace

int quantize_hf_int4(const Int4QuantizeRequest& r) {
  std::error_code ec;
  if (!is_hf_model_dir(r.input)) {
    std::fprintf(stderr,
                 "folio quantize: --type %s reads a Hugging Face directory (config.json and safetensors); '%s' is "
                 "not one\n",
                 r.gptq ? "gptq" : "int4", r.input.c_str());
    return 2;
  }
  if (r.gptq && r.calibration_text.empty()) {
    std::fprintf(stderr, "folio quantize: --type gptq needs --calibration-text (the inputs whose outputs it keeps)\n");
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
  std::unique_ptr<cpu::ActivationStats> stats;
  if (r.gptq) {
    Expected<std::unique_ptr<cpu::ActivationStats>> collected =
        collect_importance(r.input, r.calibration_text, r.calibration_tokens, r.threads, r.quiet, /*gram=*/true);
    if (!collected) {
      std::fprintf(stderr, "folio quantize: %s\n", collected.error().c_str());
      return 2;
    }
    stats = std::move(collected).value();
  }
  const fs::path partial = out.parent_path() / (out.filename().string() + ".partial");
  fs::remove_all(partial, ec);
  fs::create_directories(partial, ec);
  if (ec) {
    std::fprintf(stderr, "folio quantize: cannot create '%s': %s\n", partial.c_str(), ec.message().c_str());
    return 1;
  }
  Status s = write_checkpoint(r, *checkpoint, config_text, stats.get(), partial);
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
