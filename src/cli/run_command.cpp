// `folio run`: generate text from a prompt, streaming it to stdout as it is produced.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/model_session.h"
#include "engine/sampler.h"
#include "engine/sequence_runner.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace folio::cli {
namespace {

struct RunOptions {
  std::string model;
  std::string prompt;
  int max_tokens = 128;
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repetition_penalty = 1.0f;
  int64_t seed = -1;
  bool chat = false;
  std::string system_prompt;
  int threads = 0;
  int context = 0;
  bool quiet = false;
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Expected<std::string> chat_prompt(const ModelSession& session, const RunOptions& options) {
  const std::optional<std::string> source = session.file->get_string("tokenizer.chat_template");
  if (!source) return Status::error("--chat: the model has no chat template (tokenizer.chat_template)");
  Expected<ChatTemplate> chat_template = ChatTemplate::parse(*source);
  if (!chat_template) return chat_template.status();
  std::vector<ChatMessage> messages;
  if (!options.system_prompt.empty()) messages.push_back({"system", options.system_prompt});
  messages.push_back({"user", options.prompt});
  const Tokenizer& tok = *session.tokenizer;
  nlohmann::json extra = {{"bos_token", tok.token_to_piece(tok.bos_id())},
                          {"eos_token", tok.token_to_piece(tok.eos_id())}};
  return chat_template->render(messages, /*add_generation_prompt=*/true, extra);
}

int run(const RunOptions& options) {
  SamplingParams params;
  params.temperature = options.temperature;
  params.top_k = options.top_k;
  params.top_p = options.top_p;
  params.min_p = options.min_p;
  params.repetition_penalty = options.repetition_penalty;
  if (options.seed >= 0) params.seed = static_cast<uint64_t>(options.seed);
  if (Status s = params.validate(); !s) {
    std::fprintf(stderr, "folio run: %s\n", s.message().c_str());
    return 2;
  }

  Expected<ModelSession> session = open_model_session(options.model, options.threads, options.quiet);
  if (!session) {
    std::fprintf(stderr, "folio run: %s\n", session.error().c_str());
    return 1;
  }
  const Tokenizer& tokenizer = *session->tokenizer;
  std::vector<int32_t> prompt_tokens;
  if (options.chat) {
    Expected<std::string> text = chat_prompt(*session, options);
    if (!text) {
      std::fprintf(stderr, "folio run: %s\n", text.error().c_str());
      return 1;
    }
    // The template already wrote any BOS; special-token texts in it are tokens.
    prompt_tokens = tokenizer.encode(*text, /*add_special=*/false, /*parse_special=*/true);
  } else {
    prompt_tokens = tokenizer.encode(options.prompt, /*add_special=*/true, /*parse_special=*/false);
  }
  if (prompt_tokens.empty()) {
    std::fprintf(stderr, "folio run: the prompt is empty\n");
    return 2;
  }
  const int32_t context = options.context > 0 ? options.context : session->model->config().context_length;
  if (static_cast<int64_t>(prompt_tokens.size()) >= context) {
    std::fprintf(stderr, "folio run: the prompt has %zu tokens, more than the context size %d\n",
                 prompt_tokens.size(), context);
    return 2;
  }

  SequenceRunner runner(*session->model, *session->backend, context);
  Sampler sampler(params);
  IncrementalDetokenizer detokenizer(tokenizer);
  std::vector<int32_t> output_tokens;

  const auto prompt_start = Clock::now();
  Expected<std::vector<float>> logits = runner.append(prompt_tokens);
  const double prompt_seconds = seconds_since(prompt_start);
  const auto generation_start = Clock::now();
  while (logits && static_cast<int>(output_tokens.size()) < options.max_tokens) {
    const SampleResult result = sampler.sample(*logits, prompt_tokens, output_tokens);
    if (tokenizer.is_end_of_generation(result.token)) break;
    output_tokens.push_back(result.token);
    const std::string piece = detokenizer.push(result.token);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    if (runner.num_tokens() >= runner.capacity()) break;
    const int32_t next[1] = {result.token};
    logits = runner.append(next);
  }
  const std::string tail = detokenizer.flush();
  std::fwrite(tail.data(), 1, tail.size(), stdout);
  std::fputc('\n', stdout);
  const double generation_seconds = seconds_since(generation_start);
  if (!logits) {
    std::fprintf(stderr, "folio run: %s\n", logits.error().c_str());
    return 1;
  }
  if (!options.quiet) {
    std::fprintf(stderr, "prompt: %zu tokens, %.1f tok/s | generation: %zu tokens, %.1f tok/s\n",
                 prompt_tokens.size(), prompt_tokens.size() / prompt_seconds, output_tokens.size(),
                 output_tokens.empty() ? 0.0 : output_tokens.size() / generation_seconds);
  }
  return 0;
}

}  // namespace

CommandRunner add_run_command(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Generate text from a prompt");
  cmd->add_option("-m,--model", options->model, "GGUF model file (default: SmolLM2-135M-Instruct Q4_1)");
  cmd->add_option("-p,--prompt", options->prompt, "Prompt text")->required();
  cmd->add_option("-n,--max-tokens", options->max_tokens, "Tokens to generate")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--temp,--temperature", options->temperature, "Sampling temperature (0 = greedy)")->check(CLI::Range(0.0f, 100.0f));
  cmd->add_option("--top-k", options->top_k, "Top-k (<= 0: off)");
  cmd->add_option("--top-p", options->top_p, "Top-p (nucleus)")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--min-p", options->min_p, "Min-p")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--repeat-penalty", options->repetition_penalty, "Repetition penalty")->check(CLI::Range(0.0f, 10.0f));
  cmd->add_option("--seed", options->seed, "Random seed (-1: random)");
  cmd->add_flag("--chat", options->chat, "Apply the model's chat template");
  cmd->add_option("--system", options->system_prompt, "System prompt (with --chat)");
  cmd->add_option("-t,--threads", options->threads, "CPU threads (0: all)")->check(CLI::Range(0, 1024));
  cmd->add_option("-c,--ctx-size", options->context, "Context size (0: the model's)")->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("-q,--quiet", options->quiet, "No progress or timing lines on stderr");
  return [options] { return run(*options); };
}

}  // namespace folio::cli
