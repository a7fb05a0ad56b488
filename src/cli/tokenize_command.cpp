// `folio tokenize`: a text's token ids under a model's tokenizer (a GGUF file's or a Hugging
// Face directory's tokenizer.json), without loading the weights. Form feeds split the text into
// documents encoded one by one (ids concatenated). --bench times that, to compare with other
// tokenizers (bench/tokenizer_vs_hf.py).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "cli/model_session.h"
#include "model/gguf_tokenizer.h"
#include "model/hf_directory.h"

namespace folio::cli {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string text_file;
  std::string prompt;
  bool special = false;
  bool no_add_special = false;
  int bench_repeats = 0;
};

Expected<Tokenizer> open_tokenizer(const std::string& path) {
  const std::string model = path.empty() ? default_model_path() : path;
  if (std::filesystem::is_directory(model)) {
    Expected<HfTokenizerFiles> files = read_hf_tokenizer_files(model);
    if (!files) return files.status();
    return Tokenizer::from_hf(*files);
  }
  Expected<GgufFile> file = GgufFile::open(model);
  if (!file) return file.status();
  return tokenizer_from_gguf(*file);
}

int run(const TokenizeOptions& options) {
  std::string text = options.prompt;
  if (!options.text_file.empty()) {
    std::ifstream in(options.text_file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "folio tokenize: cannot read '%s'\n", options.text_file.c_str());
      return 2;
    }
    std::stringstream buffer;
    buffer << in.rdbuf();
    text = buffer.str();
  }
  const auto load_start = std::chrono::steady_clock::now();
  Expected<Tokenizer> tokenizer = open_tokenizer(options.model);
  if (!tokenizer) {
    std::fprintf(stderr, "folio tokenize: %s\n", tokenizer.error().c_str());
    return 1;
  }
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  const bool add_special = !options.no_add_special;
  // Form feeds separate documents, each encoded on its own (as prompts are).
  std::vector<std::string_view> documents;
  for (size_t at = 0; at <= text.size();) {
    const size_t end = std::min(text.find('\f', at), text.size());
    documents.push_back(std::string_view(text).substr(at, end - at));
    at = end + 1;
  }
  if (options.bench_repeats > 0) {
    std::vector<double> seconds;
    size_t tokens = 0;
    for (int r = 0; r < options.bench_repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      tokens = 0;
      for (const std::string_view document : documents) {
        tokens += tokenizer->encode(document, add_special, options.special).size();
      }
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[seconds.size() / 2];
    nlohmann::json out = {{"bytes", text.size()},
                          {"tokens", tokens},
                          {"load_seconds", load_s},
                          {"median_seconds", median},
                          {"mb_per_s", text.size() / median / 1e6},
                          {"repeats", options.bench_repeats}};
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::vector<int32_t> ids;
  for (const std::string_view document : documents) {
    for (const int32_t id : tokenizer->encode(document, add_special, options.special)) ids.push_back(id);
  }
  std::printf("%s\n", nlohmann::json(ids).dump().c_str());
  return 0;
}

}  // namespace

CommandRunner add_tokenize_command(CLI::App& app) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Token ids of a text (JSON), or --bench: encoding throughput");
  cmd->add_option("-m,--model", options->model,
                  "GGUF file or Hugging Face model directory (default: SmolLM2-135M-Instruct Q4_1)");
  auto* file = cmd->add_option("-f,--file", options->text_file, "Text file");
  cmd->add_option("-p,--prompt", options->prompt, "Text")->excludes(file);
  cmd->add_flag("--special", options->special, "Read special-token texts (<|im_end|>, ...) as those tokens");
  cmd->add_flag("--no-add-special", options->no_add_special, "Do not add BOS / EOS");
  cmd->add_option("--bench", options->bench_repeats, "Time N encodings of the whole text; print JSON")
      ->check(CLI::Range(1, 1000));
  return [options] { return run(*options); };
}

}  // namespace folio::cli
