// What every subcommand does first: find the model file, map it, load weights with a
// progress line, read its tokenizer, and make a backend.
#pragma once

#include <memory>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "cli/engine_options.h"
#include "core/status.h"
#include "engine/engine.h"
#include "engine/model_executor.h"
#include "model/gguf_file.h"
#include "model/llama_model.h"
#include "text/tokenizer.h"

namespace folio::cli {

// $FOLIO_MODELS_DIR, or ~/.cache/folio/models.
std::string models_dir();
// The default model (SmolLM2-135M-Instruct Q4_1) inside models_dir().
std::string default_model_path();

struct ModelSession {
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<cpu::CpuBackend> backend;
  // The GPU executor (--device cuda), made by the first make_engine and reused by later ones;
  // it holds the KV pool, so engines must not outlive the session.
  std::unique_ptr<ModelExecutor> executor;
};

// path empty: the default model. Progress goes to stderr unless quiet.
Expected<ModelSession> open_model_session(const std::string& path, int num_threads, bool quiet);

// An engine on the device options.device names: the CPU path, or the CUDA executor (created on
// first use from the engine options and config; an error when folio was built without CUDA).
Expected<std::unique_ptr<Engine>> make_engine(ModelSession& session, const EngineOptions& options,
                                              const EngineConfig& config, bool quiet);

}  // namespace folio::cli
