// What every subcommand does first: find the model (a GGUF file or a Hugging Face directory),
// map it, load its weights with a progress line, read its tokenizer, chat template and
// generation defaults, make the CPU backend; then an executor on the device asked for; and, for
// `run` and `serve`, the engine over it, with one ladder of errors for all (and `bench batch`).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/status.h"
#include "engine/engine.h"
#include "engine/spec/proposer.h"
#include "executor/executor.h"
#include "executor/kv_pool_sizing.h"
#include "model/gguf_file.h"
#include "model/hf_checkpoint.h"
#include "model/hf_directory.h"
#include "model/model_weights.h"
#include "text/tokenizer.h"

namespace folio::cli {

struct EngineOptions;

// $FOLIO_MODELS_DIR, or ~/.cache/folio/models.
std::string models_dir();
// The default model (SmolLM2-135M-Instruct Q4_1) inside models_dir().
std::string default_model_path();

struct ModelSession {
  std::string path;
  std::unique_ptr<GgufFile> file;            // a GGUF model
  std::unique_ptr<HfCheckpoint> checkpoint;  // a Hugging Face directory's safetensors
  std::unique_ptr<ModelWeights> weights;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<cpu::CpuBackend> backend;  // the CPU executor's; CUDA uses it for nothing
  std::optional<std::string> chat_template;  // the model's Jinja source, if it has one
  HfGenerationConfig generation;             // generation_config.json (empty for GGUF)
  double load_seconds = 0.0;                 // mapping, weights and tokenizer
};

// path empty: the default model. A folder with a config.json is read as a Hugging Face
// directory. device: where the weights will be computed on ("cpu" or "cuda"), which decides
// how a directory's weights are prepared (HfLoadOptions). Progress goes to stderr unless quiet.
Expected<ModelSession> open_model_session(const std::string& path, int num_threads, bool quiet,
                                          const std::string& device = "cpu");

// The sampling values a request gets when it gives none: generation_config.json's, over
// SamplingParams' defaults; validated (an out-of-range value in the file is an error).
Expected<SamplingParams> default_sampling(const ModelSession& session);

// What an executor is asked to be.
struct ExecutorRequest {
  std::string device = "cpu";
  KvCacheOptions kv;
  bool kv_size_given = false;  // cuda: else the pool is what gpu_memory_utilization leaves
  double gpu_memory_utilization = 0.9;
  int32_t max_num_batched_tokens = 512;
  int32_t max_num_seqs = 64;
  int32_t max_model_len = 0;   // 0: the model's trained context
  int32_t max_logit_rows = 0;  // cuda: rows of logits one step returns (0: one per sequence)
  bool cuda_graphs = true;
  bool batch_invariant = false;
  std::string quantization = "auto";             // --quantization (engine_options.h)
  int32_t tensor_parallel_size = 1;              // --tensor-parallel-size (engine_options.h)
  std::vector<int32_t> tensor_parallel_devices;  // --tensor-parallel-devices (engine_options.h)
};

// The executor on request.device: the CPU, or the CUDA executor (an error when folio was built
// without CUDA). The session must outlive it.
Expected<std::unique_ptr<Executor>> make_executor(ModelSession& session, const ExecutorRequest& request, bool quiet);

// A model with its executor and the engine configuration the options asked for: what `folio
// bench batch` needs, which makes an engine per run.
struct ExecutorSession {
  ModelSession model;
  std::unique_ptr<Executor> executor;
  EngineConfig config;
  // Speculative decoding: the draft model with its own executor and KV pool (--speculative-model),
  // and the proposer every engine over this executor gets (null: speculation off).
  std::unique_ptr<ModelSession> draft_model;
  std::unique_ptr<Executor> draft_executor;
  std::unique_ptr<Proposer> proposer;
};

// With one engine over the executor, as `folio run` and `folio serve` use it.
struct ServingSession : ExecutorSession {
  std::unique_ptr<Engine> engine;
};

// Builds the session from the command's options (context 0: the model's). Returns 0, or prints
// "folio <command>: <what went wrong>" and returns the exit code: 2 for options that do not fit
// together, 1 when the model or the device fails.
int open_executor_session(const char* command, const std::string& model_path, int num_threads, int context, bool quiet,
                          const EngineOptions& options, ExecutorSession& out);
int open_serving_session(const char* command, const std::string& model_path, int num_threads, int context, bool quiet,
                         const EngineOptions& options, ServingSession& out);

}  // namespace folio::cli
