// `folio synth`: writes a random-weight GGUF of a real model's shape (model/synth_model.h), for
// benchmarks and GPU checks that need an 8B-sized model and no download.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "model/synth_hf_model.h"
#include "model/synth_model.h"

namespace folio::cli {
namespace {

struct SynthCommandOptions {
  std::string config = "tiny";
  std::string format = "gguf";
  std::string dtype = "bf16";
  int64_t group_size = 128;
  bool symmetric = false;
  std::string output;
  uint64_t seed = 1;
  int32_t layers = 0;
  bool quiet = false;
};

DType parse_dtype(const std::string& name) {
  if (name == "f16") return DType::F16;
  if (name == "f32") return DType::F32;
  if (name == "q8_0") return DType::Q8_0;
  if (name == "q4_0") return DType::Q4_0;
  if (name == "q4_1") return DType::Q4_1;
  if (name == "q5_0") return DType::Q5_0;
  if (name == "q4_k" || name == "q4_k_m") return DType::Q4_K;
  if (name == "q5_k") return DType::Q5_K;
  if (name == "q6_k") return DType::Q6_K;
  return DType::BF16;
}

const char* const kHfDtypes[] = {"bf16", "gptq", "gptq-act-order", "awq", "fp8"};

bool is_hf_dtype(const std::string& d) {
  return std::find(std::begin(kHfDtypes), std::end(kHfDtypes), d) != std::end(kHfDtypes);
}

SynthHfFormat parse_hf_dtype(const std::string& name) {
  if (name == "gptq") return SynthHfFormat::kGptq;
  if (name == "gptq-act-order") return SynthHfFormat::kGptqActOrder;
  if (name == "awq") return SynthHfFormat::kAwq;
  if (name == "fp8") return SynthHfFormat::kFp8;
  return SynthHfFormat::kBf16;
}

int run_synth(const SynthCommandOptions& options) {
  Expected<SynthConfig> config = synth_config(options.config);
  if (!config) {
    std::fprintf(stderr, "folio: error: %s\n", config.error().c_str());
    return 1;
  }
  const bool hf = options.format == "hf";
  const bool valid = hf ? is_hf_dtype(options.dtype) : options.dtype == "bf16" || !is_hf_dtype(options.dtype);
  if (!valid) {
    std::fprintf(stderr,
                 "folio: error: --dtype %s is not a %s type (GGUF: the block types; hf: bf16, gptq, "
                 "gptq-act-order, awq, fp8)\n",
                 options.dtype.c_str(), hf ? "Hugging Face" : "GGUF");
    return 2;
  }
  SynthOptions synth{parse_dtype(options.dtype), options.seed, options.layers, options.dtype == "q4_k_m"};
  const auto start = std::chrono::steady_clock::now();
  int last_percent = -1;
  auto progress = [&](uint64_t done, uint64_t total) {
    const int percent = total == 0 ? 100 : static_cast<int>(done * 100 / total);
    if (options.quiet || percent / 5 == last_percent / 5) return;
    last_percent = percent;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "synth %s: %3d%% (%.2f of %.2f GB, %.0f MB/s)\n", options.output.c_str(), percent, done / 1e9,
                 total / 1e9, seconds > 0 ? done / 1e6 / seconds : 0.0);
    std::fflush(stderr);
  };
  const Status s = hf ? write_synth_hf_model(*config,
                                             {parse_hf_dtype(options.dtype), options.seed, options.layers,
                                              options.group_size, options.symmetric},
                                             options.output, progress)
                      : write_synth_model(*config, synth, options.output, progress);
  if (!s) {
    std::fprintf(stderr, "folio: error: %s\n", s.message().c_str());
    return 1;
  }
  if (!options.quiet) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "synth: wrote %s (%s, %s) in %.1f s\n", options.output.c_str(), options.config.c_str(),
                 options.dtype.c_str(), seconds);
  }
  return 0;
}

}  // namespace

CommandRunner add_synth_command(CLI::App& app) {
  auto options = std::make_shared<SynthCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "synth", "Write a random-weight model of a known shape: a GGUF file, or a Hugging Face directory (--format hf)");
  std::vector<std::string> configs = synth_config_names();
  cmd->add_option("--config", options->config, "Model shape")->check(CLI::IsMember(configs))->capture_default_str();
  cmd->add_option("--format", options->format,
                  "gguf: one GGUF file; hf: a Hugging Face directory (Llama shapes) whose layer matrices are BF16, "
                  "4-bit GPTQ / AWQ checkpoints of the same weights rounded to nearest, or FP8")
      ->check(CLI::IsMember({"gguf", "hf"}))
      ->capture_default_str();
  cmd->add_option("--dtype", options->dtype,
                  "Type of the 2-D weights. GGUF: bf16 f16 f32 q8_0 q4_0 q4_1 q5_0 q4_k q5_k q6_k q4_k_m (Q4_K with "
                  "attn_v, ffn_down and output in Q6_K); hf: bf16 gptq gptq-act-order awq fp8 (E4M3, a scale per row)")
      ->check(CLI::IsMember({"bf16", "f16", "f32", "q8_0", "q4_0", "q4_1", "q5_0", "q4_k", "q5_k", "q6_k", "q4_k_m",
                             "gptq", "gptq-act-order", "awq", "fp8"}))
      ->capture_default_str();
  cmd->add_option("--group-size", options->group_size, "hf 4-bit: inputs per scale and zero")
      ->check(CLI::Range(int64_t{32}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_flag("--sym", options->symmetric, "hf gptq: symmetric groups (zero 8)");
  cmd->add_option("-o,--output", options->output, "Output GGUF file, or directory (--format hf)")->required();
  cmd->add_option("--seed", options->seed, "Random seed")->capture_default_str();
  cmd->add_option("--layers", options->layers, "Number of layers (0: the config's)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", options->quiet, "No progress on stderr");
  return [options] { return run_synth(*options); };
}

}  // namespace folio::cli
