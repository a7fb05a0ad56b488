// `folio quantize IN OUT --type T`: an F32 / F16 / BF16 GGUF re-encoded in a GGUF block type, or
// any GGUF decoded to F32 / F16 / BF16, or a Hugging Face directory to a GPTQ 4-bit one
// (--type gptq | int4: cli/quantize_int4.h)
// (model/gguf_quantize.h), with progress per tensor. The output is written under a temporary
// name beside OUT and renamed when complete, so a failure (a quantized input, a full disk, an
// interrupted run) leaves no partial OUT.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "cli/commands.h"
#include "cli/importance_matrix.h"
#include "cli/quantize_int4.h"
#include "model/gguf_file.h"
#include "model/gguf_quantize.h"

namespace folio::cli {
namespace {

struct QuantizeOptions {
  std::string input, output, type;
  std::string imatrix_text;  // calibration text for an importance matrix (empty: none)
  int32_t imatrix_tokens = 4096;
  int threads = 0;
  bool quiet = false;
  int64_t group_size = 128;  // gptq / int4
  bool act_order = false;
  bool symmetric = false;
  bool no_clip = false;
};

int run(const QuantizeOptions& options) {
  namespace fs = std::filesystem;
  if (options.type == "gptq" || options.type == "awq" || options.type == "int4") {
    using Method = Int4QuantizeRequest::Method;
    Int4QuantizeRequest request;
    request.input = options.input;
    request.output = options.output;
    request.method = options.type == "gptq"  ? Method::kGptq
                     : options.type == "awq" ? Method::kAwq
                                             : Method::kRoundToNearest;
    request.options = {
        .group_size = options.group_size, .symmetric = options.symmetric, .act_order = options.act_order};
    request.calibration_text = options.imatrix_text;
    request.calibration_tokens = options.imatrix_tokens;
    request.threads = options.threads;
    request.quiet = options.quiet;
    request.awq_clip = !options.no_clip;
    if (options.no_clip && request.method != Method::kAwq) {
      std::fprintf(stderr, "folio quantize: --no-clip is AWQ's (--type awq)\n");
      return 2;
    }
    if (options.act_order && request.method != Method::kGptq) {
      std::fprintf(stderr, "folio quantize: --act-order is GPTQ's (--type gptq)\n");
      return 2;
    }
    return quantize_hf_int4(request);
  }
  Expected<QuantizeRecipe> recipe = quantize_recipe(options.type);
  if (!recipe) {
    std::fprintf(stderr, "folio quantize: %s\n", recipe.error().c_str());
    return 2;
  }
  std::error_code ec;
  if (fs::is_directory(options.input, ec)) {
    std::fprintf(stderr,
                 "folio quantize: '%s' is a directory: quantize reads GGUF files for now (Hugging Face directories "
                 "are not supported yet)\n",
                 options.input.c_str());
    return 2;
  }
  if (fs::exists(options.output, ec) && fs::equivalent(options.input, options.output, ec)) {
    std::fprintf(stderr, "folio quantize: the output would overwrite the input\n");
    return 2;
  }
  Expected<GgufFile> in = GgufFile::open(options.input);
  if (!in) {
    std::fprintf(stderr, "folio quantize: %s\n", in.error().c_str());
    return 1;
  }
  std::unique_ptr<cpu::ActivationStats> stats;
  if (!options.imatrix_text.empty()) {
    Expected<std::unique_ptr<cpu::ActivationStats>> collected =
        collect_importance(options.input, options.imatrix_text, options.imatrix_tokens, options.threads, options.quiet);
    if (!collected) {
      std::fprintf(stderr, "folio quantize: %s\n", collected.error().c_str());
      return 2;
    }
    stats = std::move(collected).value();
  }
  const fs::path out(options.output);
  const fs::path partial = out.parent_path() / (out.filename().string() + ".partial");
  const auto start = std::chrono::steady_clock::now();
  size_t shown = 0;
  auto progress = [&](const QuantizeProgress& p) {
    if (options.quiet || p.tensor == shown) return;
    shown = p.tensor;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "[%zu/%zu] %-32s %s -> %s  (%.0f%%, %.1f s)\n", p.tensor, p.tensors, p.name.c_str(),
                 std::string(dtype_name(p.from)).c_str(), std::string(dtype_name(p.to)).c_str(),
                 p.bytes_total ? 100.0 * static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes_total) : 100.0,
                 seconds);
  };
  Status s = quantize_gguf(*in, partial.string(), *recipe, progress, stats ? importance_of(*stats) : ImportanceFn{});
  if (s) {
    fs::rename(partial, out, ec);
    if (ec) s = Status::error("cannot rename '" + partial.string() + "' to '" + out.string() + "': " + ec.message());
  }
  if (!s) {
    fs::remove(partial, ec);
    std::fprintf(stderr, "folio quantize: %s\n", s.message().c_str());
    return 1;
  }
  if (!options.quiet) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "folio quantize: wrote %s (%s, %.1f MiB -> %.1f MiB) in %.1f s\n", out.c_str(),
                 recipe->name.c_str(), static_cast<double>(in->file_size()) / (1 << 20),
                 static_cast<double>(fs::file_size(out, ec)) / (1 << 20), seconds);
  }
  return 0;
}

}  // namespace

CommandRunner add_quantize_command(CLI::App& app) {
  auto options = std::make_shared<QuantizeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "quantize", "Re-encode an F32 / F16 / BF16 GGUF in a GGUF block type, or a Hugging Face directory as GPTQ 4-bit");
  cmd->add_option("input", options->input, "Input GGUF (F32, F16 or BF16 weights), or a directory for gptq / int4")
      ->required();
  cmd->add_option("output", options->output, "Output GGUF, or directory for gptq / int4")->required();
  std::string names;
  for (const std::string& n : quantize_recipe_names()) names += (names.empty() ? "" : " | ") + n;
  cmd->add_option("--type", options->type,
                  "Block type: " + names +
                      " | gptq (Hugging Face directory in, GPTQ 4-bit directory out; needs --calibration-text) | "
                      "awq (the same, AWQ's layout and activation-aware scales) | int4 (GPTQ's layout, rounded to "
                      "nearest)")
      ->required();
  cmd->add_option("--group-size", options->group_size, "gptq / int4: inputs per scale and zero (a multiple of 32)")
      ->check(CLI::Range(int64_t{32}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_flag("--act-order", options->act_order,
                "gptq: quantize inputs by decreasing activation energy (desc_act, a shuffled g_idx)");
  cmd->add_flag("--no-clip", options->no_clip,
                "awq: skip AWQ's clipping search (each group's range clamped where that lowers the output error)");
  cmd->add_flag("--sym", options->symmetric, "gptq / int4: symmetric groups (zero 8) instead of min / max");
  cmd->add_option("--imatrix-text,--calibration-text", options->imatrix_text,
                  "Calibration text: the input model reads it on the CPU and each weight's quantization error is "
                  "weighted by the mean square of its input feature (an importance matrix); for gptq, each "
                  "matrix input's Gram matrix");
  cmd->add_option("--imatrix-tokens,--calibration-tokens", options->imatrix_tokens,
                  "Tokens of the calibration text to read (chunks of 512)")
      ->check(CLI::Range(512, 1 << 24))
      ->capture_default_str();
  cmd->add_option("-t,--threads", options->threads, "CPU threads for the importance matrix (0: all)")
      ->check(CLI::Range(0, 1024));
  cmd->add_flag("-q,--quiet", options->quiet, "No progress on stderr");
  return [options] { return run(*options); };
}

}  // namespace folio::cli
