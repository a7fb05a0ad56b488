// `folio synth`: writes a random-weight GGUF of a real model's shape (model/synth_model.h), for
// benchmarks and GPU checks that need an 8B-sized model and no download.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "model/synth_model.h"

namespace folio::cli {
namespace {

struct SynthCommandOptions {
  std::string config = "tiny";
  std::string dtype = "bf16";
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

int run_synth(const SynthCommandOptions& options) {
  Expected<SynthConfig> config = synth_config(options.config);
  if (!config) {
    std::fprintf(stderr, "folio: error: %s\n", config.error().c_str());
    return 1;
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
  if (Status s = write_synth_model(*config, synth, options.output, progress); !s) {
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
  CLI::App* cmd = app.add_subcommand("synth", "Write a random-weight GGUF model of a known shape");
  std::vector<std::string> configs = synth_config_names();
  cmd->add_option("--config", options->config, "Model shape")->check(CLI::IsMember(configs))->capture_default_str();
  cmd->add_option("--dtype", options->dtype,
                  "Type of the 2-D weights (q4_k_m: Q4_K with attn_v, ffn_down and output in Q6_K)")
      ->check(CLI::IsMember({"bf16", "f16", "f32", "q8_0", "q4_0", "q4_1", "q5_0", "q4_k", "q5_k", "q6_k", "q4_k_m"}))
      ->capture_default_str();
  cmd->add_option("-o,--output", options->output, "Output GGUF file")->required();
  cmd->add_option("--seed", options->seed, "Random seed")->capture_default_str();
  cmd->add_option("--layers", options->layers, "Number of layers (0: the config's)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", options->quiet, "No progress on stderr");
  return [options] { return run_synth(*options); };
}

}  // namespace folio::cli
