// `folio serve`: the engine behind an OpenAI-compatible HTTP API (src/server/). The engine runs
// on its own thread (EngineWorker); a few io threads run every connection. SIGINT/SIGTERM stop
// accepting, abort what is in flight and exit 0.
#include <sys/resource.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "cli/model_session.h"
#include "engine/engine.h"
#include "server/api_routes.h"
#include "server/engine_worker.h"
#include "server/http_server.h"

namespace folio::cli {
namespace {

struct ServeOptions {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  std::string served_model_name;
  int threads = 0;
  int context = 0;
  int http_threads = 2;
  int64_t max_body_bytes = int64_t{8} << 20;
  int max_queue = 0;
  std::string chat_template_file;
  bool special_tokens_in_content = false;
  bool quiet = false;
  EngineOptions engine;
};

// What clients call the model when --served-model-name is not given: the file's name.
std::string default_model_name(const std::string& path) {
  // A directory's name is the model's (a trailing slash would make it empty).
  std::filesystem::path p(path.empty() ? default_model_path() : path);
  if (!p.has_filename()) p = p.parent_path();
  return std::filesystem::is_directory(p) ? p.filename().string() : p.stem().string();
}

Expected<server::ModelInfo> model_info(const ModelSession& session, const Engine& engine, const ServeOptions& options) {
  server::ModelInfo info;
  info.tokenizer = session.tokenizer.get();
  info.name = options.served_model_name.empty() ? default_model_name(options.model) : options.served_model_name;
  std::optional<std::string> source = session.chat_template;
  std::string origin = "the model's chat template";
  if (!options.chat_template_file.empty()) {
    std::ifstream in(options.chat_template_file, std::ios::binary);
    if (!in) return Status::error("cannot read the chat template file '" + options.chat_template_file + "'");
    source = std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    origin = "the chat template in '" + options.chat_template_file + "'";
  }
  if (source) {
    Expected<ChatTemplate> chat_template = ChatTemplate::parse(*source);
    if (!chat_template) return Status::error(origin + " does not parse: " + chat_template.error());
    info.chat_template = std::move(chat_template).value();
  }
  info.content_tokens = options.special_tokens_in_content ? ContentTokens::kParsed : ContentTokens::kText;
  Expected<SamplingParams> sampling = default_sampling(session);
  if (!sampling) return sampling.status();
  info.default_sampling = *sampling;
  if (session.generation.max_new_tokens && *session.generation.max_new_tokens > 0) {
    info.default_max_tokens = session.generation.max_new_tokens;
  }
  // A request must fit the model's context and, whole, the KV pool.
  info.context_tokens = static_cast<int32_t>(engine.context_tokens());
  return info;
}

// Every open connection is a file descriptor; the usual soft limit of 1,024 would cap the
// server far below what it can hold, so take whatever the hard limit allows.
void raise_open_file_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

int serve(const ServeOptions& options) {
  raise_open_file_limit();
  ServingSession serving;
  if (const int rc = open_serving_session("serve", options.model, options.threads, options.context, options.quiet,
                                          options.engine, serving);
      rc != 0) {
    return rc;
  }
  Engine& engine = *serving.engine;
  server::EngineWorker worker(engine, options.max_queue);
  server::ApiContext context;
  context.worker = &worker;
  Expected<server::ModelInfo> info = model_info(serving.model, engine, options);
  if (!info) {
    std::fprintf(stderr, "folio serve: %s\n", info.error().c_str());
    return 1;
  }
  context.model = std::move(info).value();
  context.api_key = options.api_key;
  context.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();

  server::HttpLimits limits;
  limits.max_body_bytes = static_cast<size_t>(options.max_body_bytes);
  server::HttpServer http(context, limits);
  if (Status s = http.listen(options.host, static_cast<uint16_t>(options.port)); !s) {
    std::fprintf(stderr, "folio serve: %s\n", s.message().c_str());
    return 1;
  }
  worker.start();
  std::fprintf(stderr, "folio serve: serving '%s' on http://%s:%u (context %d tokens)\n", context.model.name.c_str(),
               options.host.c_str(), static_cast<unsigned>(http.port()), context.model.context_tokens);
  std::fflush(stderr);
  http.run(options.http_threads, [&worker] { worker.stop(); });
  // The io threads are done; stop() again is a no-op unless stop came another way.
  worker.stop();
  if (!options.quiet) std::fprintf(stderr, "folio serve: stopped\n");
  return 0;
}

}  // namespace

CommandRunner add_serve_command(CLI::App& app) {
  auto options = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API");
  cmd->add_option("-m,--model", options->model,
                  "GGUF file or Hugging Face model directory (default: SmolLM2-135M-Instruct Q4_1)");
  cmd->add_option("--host", options->host, "IP address to listen on")->capture_default_str();
  cmd->add_option("--port", options->port, "TCP port (0: any free one)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--api-key", options->api_key, "Require 'Authorization: Bearer KEY' on the API");
  cmd->add_option("--served-model-name", options->served_model_name,
                  "The model's name in the API (default: the file's)");
  cmd->add_option("-t,--threads", options->threads, "CPU threads for the model (0: all)")->check(CLI::Range(0, 1024));
  cmd->add_option("-c,--ctx-size", options->context, "Context size per request (0: the model's)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--http-threads", options->http_threads, "Threads running the HTTP connections")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--max-body-bytes", options->max_body_bytes, "Largest request body; larger ones get 413")
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--max-queue", options->max_queue, "Most requests waiting to run; more get 503 (0: no limit)")
      ->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  cmd->add_option("--chat-template", options->chat_template_file,
                  "A Jinja chat template file to use instead of the model's");
  cmd->add_flag("--special-tokens-in-content", options->special_tokens_in_content,
                "Read control-token texts in chat message content as tokens (as vLLM and llama.cpp do), letting "
                "a client write turns of its own; by default they are plain text");
  cmd->add_flag("-q,--quiet", options->quiet, "No progress lines on stderr");
  add_engine_options(*cmd, options->engine);
  return [options] { return serve(*options); };
}

}  // namespace folio::cli
