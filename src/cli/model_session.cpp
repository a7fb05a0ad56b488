#include "cli/model_session.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <unistd.h>

#include "backend/cpu/cpu_executor.h"
#include "backend/cpu/tensor_parallel_executor.h"
#include "cli/engine_options.h"
#include "cli/host_only_executor.h"
#include "engine/spec/draft_model_proposer.h"
#include "engine/spec/ngram_proposer.h"
#include "model/gguf_tokenizer.h"

#ifdef FOLIO_HAS_CUDA
#include "backend/cuda/cuda_executor.h"
#include "backend/cuda/cuda_tensor_parallel_executor.h"
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

namespace {

// A progress line: on a terminal it redraws in place; in a log, one line per 25%.
LoadProgress progress_line(const std::string& what, bool quiet) {
  const bool terminal = isatty(fileno(stderr)) != 0;
  const int step = terminal ? 1 : 25;
  auto last_percent = std::make_shared<int>(-1);
  return [=](uint64_t done, uint64_t total) {
    const int percent = total == 0 ? 100 : static_cast<int>(done * 100 / total);
    if (quiet || percent / step == *last_percent / step) return;
    *last_percent = percent;
    std::fprintf(stderr, terminal ? "\rloading %s: %3d%%" : "loading %s: %3d%%\n", what.c_str(), percent);
    if (terminal && percent == 100) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  };
}

Status open_gguf(const std::string& path, bool quiet, ModelSession& session) {
  Expected<GgufFile> file = GgufFile::open(path);
  if (!file) return file.status();
  session.file = std::make_unique<GgufFile>(std::move(file).value());
  Expected<std::unique_ptr<ModelWeights>> weights = ModelWeights::load(*session.file, progress_line(path, quiet));
  if (!weights) return weights.status();
  session.weights = std::move(weights).value();
  Expected<Tokenizer> tokenizer = tokenizer_from_gguf(*session.file);
  if (!tokenizer) return tokenizer.status();
  session.tokenizer = std::make_unique<Tokenizer>(std::move(tokenizer).value());
  session.chat_template = session.file->get_string("tokenizer.chat_template");
  // The tokenizer has its own copy: the parsed arrays go before the executor packs the weights,
  // so they do not add to the peak (Gemma 3's 262k tokens: ~38 MB).
  for (const char* key :
       {"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"}) {
    session.file->release(key);
  }
  return Status::ok();
}

Status open_hf_directory(const std::string& dir, bool quiet, const std::string& device, ModelSession& session) {
  Expected<HfDirectory> directory = read_hf_directory(dir);
  if (!directory) return directory.status();
  Expected<HfCheckpoint> checkpoint = HfCheckpoint::open(dir);
  if (!checkpoint) return checkpoint.status();
  session.checkpoint = std::make_unique<HfCheckpoint>(std::move(checkpoint).value());
  HfLoadOptions options;
  options.for_cpu = device != "cuda";
  Expected<std::unique_ptr<ModelWeights>> weights =
      ModelWeights::load_hf(*session.checkpoint, directory->model, options, progress_line(dir, quiet));
  if (!weights) return weights.status();
  session.weights = std::move(weights).value();
  if (!quiet && (directory->model.quantization.method == HfQuantization::Method::kAwq ||
                 directory->model.quantization.method == HfQuantization::Method::kGptq)) {
    std::fprintf(stderr, "%s: %s layers repacked as Q4_1%s\n", dir.c_str(),
                 directory->model.quantization.description.c_str(),
                 directory->model.quantization.desc_act ? " (act-order: columns by group, inputs gathered)" : "");
  }
  if (!quiet && directory->model.quantization.method == HfQuantization::Method::kFp8) {
    std::fprintf(stderr, "%s: %s\n", dir.c_str(), directory->model.quantization.description.c_str());
  }
  Expected<Tokenizer> tokenizer = Tokenizer::from_hf(directory->tokenizer);
  if (!tokenizer) return tokenizer.status();
  if (tokenizer->vocab_size() > session.weights->config().vocab_size) {
    return Status::error(dir + ": the tokenizer has " + std::to_string(tokenizer->vocab_size()) +
                         " tokens, more than the model's vocab_size " +
                         std::to_string(session.weights->config().vocab_size));
  }
  session.tokenizer = std::make_unique<Tokenizer>(std::move(tokenizer).value());
  session.chat_template = directory->chat_template;
  session.generation = directory->generation;
  return Status::ok();
}

}  // namespace

Expected<ModelSession> open_model_session(const std::string& path, int num_threads, bool quiet,
                                          const std::string& device) {
  const std::string model_path = path.empty() ? default_model_path() : path;
  if (!std::filesystem::exists(model_path)) {
    return Status::error("model file '" + model_path + "' does not exist" +
                         (path.empty() ? " (run scripts/fetch-model to download the default model)" : ""));
  }
  const auto start = std::chrono::steady_clock::now();
  ModelSession session;
  session.path = model_path;
  const bool directory = std::filesystem::is_directory(model_path);
  if (directory && !is_hf_model_dir(model_path)) {
    return Status::error("'" + model_path + "' is a folder without a config.json (not a Hugging Face model directory)");
  }
  if (Status s =
          directory ? open_hf_directory(model_path, quiet, device, session) : open_gguf(model_path, quiet, session);
      !s) {
    return s;
  }
  session.backend = std::make_unique<cpu::CpuBackend>(num_threads);
  session.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!quiet) {
    const ModelConfig& c = session.weights->config();
    std::fprintf(stderr,
                 "model: %s (%s, %d layers, hidden %d, %d heads / %d kv heads, vocab %d), "
                 "%.1f MiB of weights, loaded in %.2f s; cpu: %d threads, %s kernels\n",
                 c.name.c_str(), c.architecture.c_str(), c.num_layers, c.hidden_dim, c.num_heads, c.num_kv_heads,
                 c.vocab_size, session.weights->weight_bytes() / 1048576.0, session.load_seconds,
                 session.backend->num_threads(), std::string(cpu::isa_name(session.backend->isa())).c_str());
  }
  return session;
}

Expected<SamplingParams> default_sampling(const ModelSession& session) {
  const HfGenerationConfig& g = session.generation;
  SamplingParams p;
  if (g.temperature) p.temperature = *g.temperature;
  if (g.top_p) p.top_p = *g.top_p;
  if (g.top_k) p.top_k = *g.top_k;
  if (g.min_p) p.min_p = *g.min_p;
  if (g.repetition_penalty) p.repetition_penalty = *g.repetition_penalty;
  if (Status s = p.validate(); !s) return Status::error("generation_config.json: " + s.message());
  return p;
}

#ifdef FOLIO_HAS_CUDA
namespace {

// One GPU, or (--tensor-parallel-size / --tensor-parallel-devices) the model split over ranks.
Expected<std::unique_ptr<Executor>> make_cuda_executor(const ModelWeights& weights, const ExecutorRequest& request,
                                                       const cuda::CudaExecutorOptions& options) {
  std::vector<int32_t> devices = request.tensor_parallel_devices;
  if (devices.empty() && request.tensor_parallel_size > 1) {
    for (int32_t r = 0; r < request.tensor_parallel_size; ++r) devices.push_back(r);
  }
  if (devices.empty()) {
    Expected<std::unique_ptr<cuda::CudaExecutor>> one = cuda::CudaExecutor::create(weights, options);
    if (!one) return one.status();
    return std::unique_ptr<Executor>(std::move(one).value());
  }
  if (static_cast<int32_t>(devices.size()) != request.tensor_parallel_size) {
    return Status::error("--tensor-parallel-devices names " + std::to_string(devices.size()) + " GPUs for " +
                         std::to_string(request.tensor_parallel_size) + " ranks (--tensor-parallel-size)");
  }
  Expected<std::unique_ptr<cuda::CudaTensorParallelExecutor>> tp =
      cuda::CudaTensorParallelExecutor::create(weights, devices, options);
  if (!tp) return tp.status();
  return std::unique_ptr<Executor>(std::move(tp).value());
}

}  // namespace
#endif

Expected<std::unique_ptr<Executor>> make_executor(ModelSession& session, const ExecutorRequest& request, bool quiet) {
  if (std::string error =
          kv_format_shape_error(request.kv.format, request.kv.block_size, session.weights->config().head_dim);
      !error.empty()) {
    return Status::error(error);
  }
  if (request.device == "host") {
    if (request.kv.format != KvFormat::kFp16 || request.tensor_parallel_size > 1) {
      return Status::error("--device host runs no model: it takes neither --kv-cache-dtype nor --tensor-parallel-size");
    }
    const ModelConfig& config = session.weights->config();
    const int64_t blocks =
        request.kv.kv_cache_bytes / std::max<int64_t>(1, kv_bytes_per_block(config, request.kv.block_size)) + 1;
    return std::unique_ptr<Executor>(std::make_unique<HostOnlyExecutor>(
        config, static_cast<int32_t>(std::min<int64_t>(blocks, int64_t{1} << 30)), request.kv.block_size));
  }
  if (request.device != "cuda") {
    if (!request.tensor_parallel_devices.empty()) {
      return Status::error("--tensor-parallel-devices names GPUs: use it with --device cuda");
    }
    if (request.quantization != "none" && request.quantization != "auto") {
      return Status::error("--quantization " + request.quantization +
                           " is a GPU format (FP8 tensor cores): use it with --device cuda; the CPU computes with the "
                           "file's own weight types");
    }
    if (!session.weights->in_computing_order()) {
      return Status::error("the weights were prepared for the GPU (open the model for --device cpu)");
    }
    if (request.tensor_parallel_size > 1) {
      Expected<std::unique_ptr<cpu::TensorParallelExecutor>> tp =
          cpu::TensorParallelExecutor::create(*session.weights, request.tensor_parallel_size,
                                              session.backend->num_threads(), request.kv, session.backend->isa());
      if (!tp) return tp.status();
      return std::unique_ptr<Executor>(std::move(tp).value());
    }
    return std::unique_ptr<Executor>(
        std::make_unique<cpu::CpuExecutor>(*session.weights, *session.backend, request.kv));
  }
#ifdef FOLIO_HAS_CUDA
  cuda::CudaExecutorOptions options;
  options.gpu_memory_utilization = request.gpu_memory_utilization;
  options.kv_cache_bytes = request.kv_size_given ? request.kv.kv_cache_bytes : 0;
  options.block_size = request.kv.block_size;
  options.swap_space_bytes = request.kv.swap_space_bytes;
  options.kv_format = request.kv.format;
  options.num_staging_blocks = request.kv.num_staging_blocks;
  options.release_window_blocks = request.kv.release_window_blocks;
  options.staging_overlay = request.kv.staging_overlay;
  options.max_num_batched_tokens = request.max_num_batched_tokens;
  options.max_num_seqs = request.max_num_seqs;
  options.max_model_len = request.max_model_len;
  options.max_logit_rows = request.max_logit_rows;
  options.cuda_graphs = request.cuda_graphs;
  options.gemm.batch_invariant = request.batch_invariant;
  options.weight_format = request.quantization == "fp8"    ? cuda::WeightFormat::kFp8E4M3
                          : request.quantization == "auto" ? cuda::WeightFormat::kInt4
                                                           : cuda::WeightFormat::kBf16;
  options.quiet = quiet;
  const auto start = std::chrono::steady_clock::now();
  Expected<std::unique_ptr<Executor>> executor = make_cuda_executor(*session.weights, request, options);
  if (!executor) return executor.status();
  if (!quiet) {
    std::fprintf(stderr, "cuda: executor ready in %.2f s (weights uploaded, GEMMs tuned, pools allocated)\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return std::unique_ptr<Executor>(std::move(executor).value());
#else
  (void)quiet;
  return Status::error("--device cuda: this folio was built without CUDA");
#endif
}

namespace {

// Both tokenizers must give every id the same text, or the draft's guesses mean other words.
Status check_same_vocabulary(const Tokenizer& target, const Tokenizer& draft) {
  if (target.vocab_size() != draft.vocab_size()) {
    return Status::error("the draft model's tokenizer has " + std::to_string(draft.vocab_size()) +
                         " tokens and the target's " + std::to_string(target.vocab_size()));
  }
  for (int32_t id = 0; id < target.vocab_size(); ++id) {
    if (target.token_text(id) != draft.token_text(id)) {
      return Status::error("the draft model's token " + std::to_string(id) + " is '" + draft.token_text(id) +
                           "', the target's '" + target.token_text(id) + "': the vocabularies differ");
    }
  }
  return Status::ok();
}

// The draft's executor: an fp16 pool (its K/V are short-lived guesses; a residual format would
// seal blocks that rejected proposals must leave) holding as many tokens as the target's.
Expected<std::unique_ptr<Executor>> make_draft_executor(ModelSession& draft, const ModelSession& target,
                                                        const ExecutorRequest& target_request, bool quiet) {
  ExecutorRequest request = target_request;
  request.kv.format = KvFormat::kFp16;
  request.kv.block_size = 16;
  request.kv.swap_space_bytes = 0;
  request.kv.num_staging_blocks = 0;
  // One block table (a draft is small; its proposer keeps one table per sequence).
  request.kv.release_window_blocks = false;
  request.max_logit_rows = request.max_num_seqs;
  const ModelConfig& t = target.weights->config();
  const ModelConfig& d = draft.weights->config();
  int64_t tokens = 0;
  if (request.device != "cuda" || request.kv_size_given) {
    tokens = target_request.kv.kv_cache_bytes /
             std::max<int64_t>(1, kv_bytes_per_block(t, target_request.kv.block_size, target_request.kv.format,
                                                     /*release_window_blocks=*/false)) *
             target_request.kv.block_size;
  } else {
    // The target's pool is not sized yet: room for its requests at the GPU's planning length
    // (engine_options.h), and at least 64 of 2,048 tokens.
    tokens = std::max<int64_t>(int64_t{64} * 2048, static_cast<int64_t>(request.max_num_seqs) * kCudaPlannedSeqTokens);
  }
  const int64_t draft_block = kv_bytes_per_block(d, 16, KvFormat::kFp16, /*release_window_blocks=*/false);
  request.kv.kv_cache_bytes = std::min<int64_t>((tokens + 15) / 16 + 1, (int64_t{8} << 30) / draft_block) * draft_block;
  request.kv_size_given = true;
  return make_executor(draft, request, quiet);
}

int open_proposer(const char* command, const EngineOptions& options, int num_threads, bool quiet,
                  const ExecutorRequest& target_request, ExecutorSession& out) {
  const SpeculativeOptions& sp = options.speculative;
  if (sp.model.empty()) {
    out.proposer = std::make_unique<NgramProposer>(NgramConfig{sp.ngram_min, sp.ngram_max});
    return 0;
  }
  if (!quiet) std::fprintf(stderr, "draft model:\n");
  Expected<ModelSession> draft = open_model_session(sp.model, num_threads, quiet, options.device.device);
  if (!draft) {
    std::fprintf(stderr, "folio %s: --speculative-model: %s\n", command, draft.error().c_str());
    return 1;
  }
  out.draft_model = std::make_unique<ModelSession>(std::move(draft).value());
  Status compatible =
      DraftModelProposer::check_compatible(out.model.weights->config(), out.draft_model->weights->config());
  if (compatible) compatible = check_same_vocabulary(*out.model.tokenizer, *out.draft_model->tokenizer);
  if (!compatible) {
    std::fprintf(stderr, "folio %s: --speculative-model: %s\n", command, compatible.message().c_str());
    return 2;
  }
  Expected<std::unique_ptr<Executor>> executor =
      make_draft_executor(*out.draft_model, out.model, target_request, quiet);
  if (!executor) {
    std::fprintf(stderr, "folio %s: --speculative-model: %s\n", command, executor.error().c_str());
    return 1;
  }
  out.draft_executor = std::move(executor).value();
  out.proposer = std::make_unique<DraftModelProposer>(*out.draft_executor, target_request.max_num_batched_tokens);
  return 0;
}

}  // namespace

int open_executor_session(const char* command, const std::string& model_path, int num_threads, int context, bool quiet,
                          const EngineOptions& options, ExecutorSession& out) {
  Expected<EngineConfig> config = to_engine_config(options, context);
  if (!config) {
    std::fprintf(stderr, "folio %s: %s\n", command, config.error().c_str());
    return 2;
  }
  out.config = *config;
  Expected<ModelSession> session = open_model_session(model_path, num_threads, quiet, options.device.device);
  if (!session) {
    std::fprintf(stderr, "folio %s: %s\n", command, session.error().c_str());
    return 1;
  }
  out.model = std::move(session).value();
  const ExecutorRequest request = to_executor_request(options, out.config);
  // The draft first: on a GPU the target's KV pool takes what memory the draft leaves.
  if (options.speculative.enabled()) {
    if (const int rc = open_proposer(command, options, num_threads, quiet, request, out); rc != 0) return rc;
  }
  Expected<std::unique_ptr<Executor>> executor = make_executor(out.model, request, quiet);
  if (!executor) {
    std::fprintf(stderr, "folio %s: %s\n", command, executor.error().c_str());
    return 1;
  }
  out.executor = std::move(executor).value();
  // A GPU's running requests by default: what its pool holds (cuda_max_num_seqs), at most the
  // kCudaMaxNumSeqs the executor was built for.
  const bool seqs_given = options.max_num_seqs_given();
  if (options.device.device == "cuda" && !seqs_given) {
    out.config.scheduler.max_num_seqs = cuda_max_num_seqs(out.executor->kv_pool().num_pool_token_slots());
    if (!quiet) {
      std::fprintf(stderr, "cuda: up to %d requests at once (--max-num-seqs), %d prompt tokens a step beside decodes\n",
                   out.config.scheduler.max_num_seqs, out.config.scheduler.max_prefill_tokens_while_decoding);
    }
  }
  return 0;
}

int open_serving_session(const char* command, const std::string& model_path, int num_threads, int context, bool quiet,
                         const EngineOptions& options, ServingSession& out) {
  if (const int rc = open_executor_session(command, model_path, num_threads, context, quiet, options, out); rc != 0) {
    return rc;
  }
  out.engine = std::make_unique<Engine>(*out.executor, *out.model.tokenizer, out.config, out.proposer.get());
  return 0;
}

}  // namespace folio::cli
