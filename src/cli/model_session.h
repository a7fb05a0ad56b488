// What every subcommand does first: find the model file, map it, load weights with a
// progress line, read its tokenizer, and make a backend.
#pragma once

#include <memory>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "core/status.h"
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
};

// path empty: the default model. Progress goes to stderr unless quiet.
Expected<ModelSession> open_model_session(const std::string& path, int num_threads, bool quiet);

}  // namespace folio::cli
