#include "cli/model_session.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <unistd.h>

namespace folio::cli {

std::string models_dir() {
  if (const char* dir = std::getenv("FOLIO_MODELS_DIR"); dir != nullptr && *dir != '\0') return dir;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.cache/folio/models";
}

std::string default_model_path() {
  return models_dir() + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

Expected<ModelSession> open_model_session(const std::string& path, int num_threads, bool quiet) {
  const std::string model_path = path.empty() ? default_model_path() : path;
  if (!std::filesystem::exists(model_path)) {
    return Status::error("model file '" + model_path + "' does not exist" +
                         (path.empty() ? " (run scripts/fetch-model to download the default model)" : ""));
  }
  ModelSession session;
  Expected<GgufFile> file = GgufFile::open(model_path);
  if (!file) return file.status();
  session.file = std::make_unique<GgufFile>(std::move(file).value());

  // On a terminal the line redraws in place; in a log, one line per 25%.
  const bool terminal = isatty(fileno(stderr)) != 0;
  const int step = terminal ? 1 : 25;
  int last_percent = -1;
  auto progress = [&](uint64_t done, uint64_t total) {
    const int percent = total == 0 ? 100 : static_cast<int>(done * 100 / total);
    if (quiet || percent / step == last_percent / step) return;
    last_percent = percent;
    std::fprintf(stderr, terminal ? "\rloading %s: %3d%%" : "loading %s: %3d%%\n", model_path.c_str(), percent);
    if (terminal && percent == 100) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  };
  Expected<std::unique_ptr<LlamaModel>> model = LlamaModel::load(*session.file, progress);
  if (!model) return model.status();
  session.model = std::move(model).value();

  Expected<Tokenizer> tokenizer = Tokenizer::from_gguf(*session.file);
  if (!tokenizer) return tokenizer.status();
  session.tokenizer = std::make_unique<Tokenizer>(std::move(tokenizer).value());
  session.backend = std::make_unique<cpu::CpuBackend>(num_threads);
  if (!quiet) {
    const ModelConfig& c = session.model->config();
    std::fprintf(stderr, "model: %s (%s, %d layers, hidden %d, %d heads / %d kv heads, vocab %d), "
                 "%.1f MiB of weights; cpu: %d threads, %s kernels\n",
                 c.name.c_str(), c.architecture.c_str(), c.num_layers, c.hidden_dim, c.num_heads,
                 c.num_kv_heads, c.vocab_size, session.model->weight_bytes() / 1048576.0,
                 session.backend->num_threads(), std::string(cpu::isa_name(session.backend->isa())).c_str());
  }
  return session;
}

}  // namespace folio::cli
