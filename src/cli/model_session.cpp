#include "cli/model_session.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <unistd.h>

#ifdef FOLIO_HAS_CUDA
#include "backend/cuda/cuda_executor.h"
#endif

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

Expected<std::unique_ptr<Engine>> make_engine(ModelSession& session, const EngineOptions& options,
                                              const EngineConfig& config, bool quiet) {
  if (options.device != "cuda") {
    return std::make_unique<Engine>(*session.model, *session.backend, *session.tokenizer, config);
  }
#ifdef FOLIO_HAS_CUDA
  if (!session.executor) {
    cuda::CudaExecutorOptions cuda_options;
    cuda_options.gpu_memory_utilization = options.gpu_memory_utilization;
    const bool size_given = options.kv_cache_memory_option != nullptr && options.kv_cache_memory_option->count() > 0;
    cuda_options.kv_cache_bytes = size_given ? config.kv_cache_bytes : 0;
    cuda_options.block_size = config.block_size;
    cuda_options.swap_space_bytes = config.swap_space_bytes;
    cuda_options.max_num_batched_tokens = config.scheduler.max_num_batched_tokens;
    cuda_options.max_num_seqs = config.scheduler.max_num_seqs;
    cuda_options.max_model_len = config.max_model_len;
    cuda_options.cuda_graphs = !options.no_cuda_graphs;
    cuda_options.gemm.batch_invariant = options.batch_invariant;
    cuda_options.quiet = quiet;
    Expected<std::unique_ptr<ModelExecutor>> executor = cuda::make_cuda_executor(*session.model, cuda_options);
    if (!executor) return executor.status();
    session.executor = std::move(executor).value();
  }
  return std::make_unique<Engine>(*session.executor, *session.tokenizer, config);
#else
  return Status::error("--device cuda: this folio was built without CUDA");
#endif
}

}  // namespace folio::cli
