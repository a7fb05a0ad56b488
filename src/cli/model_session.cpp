#include "cli/model_session.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <unistd.h>

#include "backend/cpu/cpu_executor.h"
#include "cli/engine_options.h"
#include "model/gguf_tokenizer.h"

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
  Expected<std::unique_ptr<ModelWeights>> weights = ModelWeights::load(*session.file, progress);
  if (!weights) return weights.status();
  session.weights = std::move(weights).value();

  Expected<Tokenizer> tokenizer = tokenizer_from_gguf(*session.file);
  if (!tokenizer) return tokenizer.status();
  session.tokenizer = std::make_unique<Tokenizer>(std::move(tokenizer).value());
  session.backend = std::make_unique<cpu::CpuBackend>(num_threads);
  if (!quiet) {
    const ModelConfig& c = session.weights->config();
    std::fprintf(stderr,
                 "model: %s (%s, %d layers, hidden %d, %d heads / %d kv heads, vocab %d), "
                 "%.1f MiB of weights; cpu: %d threads, %s kernels\n",
                 c.name.c_str(), c.architecture.c_str(), c.num_layers, c.hidden_dim, c.num_heads, c.num_kv_heads,
                 c.vocab_size, session.weights->weight_bytes() / 1048576.0, session.backend->num_threads(),
                 std::string(cpu::isa_name(session.backend->isa())).c_str());
  }
  return session;
}

Expected<std::unique_ptr<Executor>> make_executor(ModelSession& session, const ExecutorRequest& request, bool quiet) {
  if (request.device != "cuda") {
    return std::unique_ptr<Executor>(
        std::make_unique<cpu::CpuExecutor>(*session.weights, *session.backend, request.kv));
  }
#ifdef FOLIO_HAS_CUDA
  cuda::CudaExecutorOptions options;
  options.gpu_memory_utilization = request.gpu_memory_utilization;
  options.kv_cache_bytes = request.kv_size_given ? request.kv.kv_cache_bytes : 0;
  options.block_size = request.kv.block_size;
  options.swap_space_bytes = request.kv.swap_space_bytes;
  options.max_num_batched_tokens = request.max_num_batched_tokens;
  options.max_num_seqs = request.max_num_seqs;
  options.max_model_len = request.max_model_len;
  options.max_logit_rows = request.max_logit_rows;
  options.cuda_graphs = request.cuda_graphs;
  options.gemm.batch_invariant = request.batch_invariant;
  options.quiet = quiet;
  Expected<std::unique_ptr<cuda::CudaExecutor>> executor = cuda::CudaExecutor::create(*session.weights, options);
  if (!executor) return executor.status();
  return std::unique_ptr<Executor>(std::move(executor).value());
#else
  (void)quiet;
  return Status::error("--device cuda: this folio was built without CUDA");
#endif
}

int open_serving_session(const char* command, const std::string& model_path, int num_threads, int context, bool quiet,
                         const EngineOptions& options, ServingSession& out) {
  Expected<EngineConfig> config = to_engine_config(options, context);
  if (!config) {
    std::fprintf(stderr, "folio %s: %s\n", command, config.error().c_str());
    return 2;
  }
  out.config = *config;
  Expected<ModelSession> session = open_model_session(model_path, num_threads, quiet);
  if (!session) {
    std::fprintf(stderr, "folio %s: %s\n", command, session.error().c_str());
    return 1;
  }
  out.model = std::move(session).value();
  Expected<std::unique_ptr<Executor>> executor =
      make_executor(out.model, to_executor_request(options, out.config), quiet);
  if (!executor) {
    std::fprintf(stderr, "folio %s: %s\n", command, executor.error().c_str());
    return 1;
  }
  out.executor = std::move(executor).value();
  out.engine = std::make_unique<Engine>(*out.executor, *out.model.tokenizer, out.config);
  return 0;
}

}  // namespace folio::cli
