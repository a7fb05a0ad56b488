// `folio run`: generate text from one prompt (streamed to stdout as it is produced) or from
// many (-p repeated, -f one prompt per line), which run through the engine as one continuous
// batch and print "[i] <text>" as each finishes.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "cli/model_session.h"
#include "cli/request_timing.h"
#include "engine/engine.h"
#include "text/chat_prompt.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace folio::cli {
namespace {

struct RunOptions {
  std::string model;
  std::vector<std::string> prompts;
  std::string prompt_file;
  int max_tokens = 128;
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repetition_penalty = 1.0f;
  int64_t seed = -1;
  int num_samples = 1;
  int beam_width = 1;
  float length_penalty = 1.0f;
  bool early_stopping = false;
  bool chat = false;
  std::string chat_template_file;  // --chat-template: instead of the model's
  std::string system_prompt;
  int threads = 0;
  int context = 0;
  bool quiet = false;
  EngineOptions engine;
};

// Lines of the file, empty ones (and a Windows line end's \r) dropped.
Expected<std::vector<std::string>> read_prompt_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::error("cannot read the prompt file '" + path + "'");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) lines.push_back(std::move(line));
  }
  return lines;
}

Expected<std::vector<int32_t>> encode_prompt(const ModelSession& session, const RunOptions& options,
                                             const std::string& prompt) {
  const Tokenizer& tok = *session.tokenizer;
  if (!options.chat) return tok.encode(prompt, /*add_special=*/true, /*parse_special=*/false);
  std::optional<std::string> source = session.chat_template;
  if (!options.chat_template_file.empty()) {
    std::ifstream in(options.chat_template_file, std::ios::binary);
    if (!in) return Status::error("cannot read the chat template file '" + options.chat_template_file + "'");
    source = std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (!source) return Status::error("--chat: the model has no chat template (give one with --chat-template FILE)");
  Expected<ChatTemplate> chat_template = ChatTemplate::parse(*source);
  if (!chat_template) return chat_template.status();
  std::vector<ChatMessage> messages;
  if (!options.system_prompt.empty()) messages.push_back({"system", options.system_prompt});
  messages.push_back({"user", prompt});
  return chat_prompt_tokens(*chat_template, tok, messages, /*add_generation_prompt=*/true);
}

RequestParams request_params(const RunOptions& options) {
  RequestParams params;
  params.sampling.temperature = options.temperature;
  params.sampling.top_k = options.top_k;
  params.sampling.top_p = options.top_p;
  params.sampling.min_p = options.min_p;
  params.sampling.repetition_penalty = options.repetition_penalty;
  // Every request gets the same seed, as vLLM does with one SamplingParams for a batch.
  if (options.seed >= 0) params.sampling.seed = static_cast<uint64_t>(options.seed);
  params.max_tokens = options.max_tokens;
  params.n = options.num_samples;
  params.beam_width = options.beam_width;
  params.length_penalty = options.length_penalty;
  params.early_stopping = options.early_stopping;
  return params;
}

void write(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
}

// The streaming line of a single prompt, as before the engine: prefill speed from the time to
// first token, decode speed over the tokens after it.
void print_single_summary(const RequestTiming& t) {
  const double ttft = t.time_to_first_token_s();
  const double tpot = t.time_per_output_token_s();
  std::fprintf(stderr, "prompt: %d tokens, %.1f tok/s | generation: %d tokens, %.1f tok/s\n", t.num_prompt_tokens,
               ttft > 0 ? t.num_prompt_tokens / ttft : 0.0, t.num_output_tokens, tpot > 0 ? 1.0 / tpot : 0.0);
}

// The most KV memory the requests held at once: what sliding-window release, prefix sharing and
// the cache's format save, in bytes (a block's size depends on its group's layers); and what
// they held when the last step began, while decoding. The peak includes a whole prefill chunk
// (the GPU's are 8,192 tokens), before which no block can leave a window: what decoding
// sequences hold is what sets how many fit.
void print_kv_summary(const EngineMetrics& m, int32_t peak_blocks, int32_t last_blocks) {
  const double block_mib = static_cast<double>(m.kv_bytes_per_block) / (1 << 20);
  std::fprintf(
      stderr,
      "KV cache: peak %.2f MiB in use (%d blocks of %.1f KiB, %d block table%s per sequence), %.2f MiB when the "
      "last step began\n",
      peak_blocks * block_mib, peak_blocks, static_cast<double>(m.kv_bytes_per_block) / 1024.0, m.kv_num_groups,
      m.kv_num_groups == 1 ? "" : "s", last_blocks * block_mib);
}

void print_batch_summary(const std::vector<RequestTiming>& timings, double seconds, const EngineMetrics& m) {
  int64_t prompt_tokens = 0, output_tokens = 0;
  std::vector<double> ttft, tpot;
  for (const RequestTiming& t : timings) {
    prompt_tokens += t.num_prompt_tokens;
    output_tokens += t.num_output_tokens;
    ttft.push_back(t.time_to_first_token_s());
    if (t.num_output_tokens > 1) tpot.push_back(t.time_per_output_token_s());
  }
  std::fprintf(stderr,
               "requests: %zu | prompt tokens: %lld | output tokens: %lld | time: %.2f s | "
               "output: %.1f tok/s | mean TTFT: %.3f s | mean TPOT: %.1f ms | preemptions: %lld | "
               "prefix-cache hits: %.1f%%\n",
               timings.size(), static_cast<long long>(prompt_tokens), static_cast<long long>(output_tokens), seconds,
               seconds > 0 ? output_tokens / seconds : 0.0, spread_of(ttft).mean, spread_of(tpot).mean * 1e3,
               static_cast<long long>(m.num_preemptions), 100.0 * m.kv.prefix_cache.token_hit_rate());
}

int run(RunOptions options) {
  if (!options.prompt_file.empty()) {
    Expected<std::vector<std::string>> lines = read_prompt_lines(options.prompt_file);
    if (!lines) {
      std::fprintf(stderr, "folio run: %s\n", lines.error().c_str());
      return 2;
    }
    options.prompts.insert(options.prompts.end(), lines->begin(), lines->end());
  }
  if (options.prompts.empty()) {
    std::fprintf(stderr, "folio run: no prompts (the prompt file has only empty lines)\n");
    return 2;
  }
  const RequestParams params = request_params(options);
  if (Status s = params.sampling.validate(); !s) {
    std::fprintf(stderr, "folio run: %s\n", s.message().c_str());
    return 2;
  }
  ServingSession serving;
  if (const int rc = open_serving_session("run", options.model, options.threads, options.context, options.quiet,
                                          options.engine, serving);
      rc != 0) {
    return rc;
  }
  const ModelSession* session = &serving.model;
  Engine& engine = *serving.engine;

  // One prompt, one sample: text streams as it comes. Otherwise each result prints whole,
  // as "[i]" (or "[i.j]" for sample / beam j) when it finishes.
  const bool several_per_prompt = options.num_samples > 1 || options.beam_width > 1;
  const bool streaming = options.prompts.size() == 1 && !several_per_prompt;
  std::map<RequestId, size_t> index_of;
  std::vector<RequestTiming> timings(options.prompts.size());
  std::map<std::pair<size_t, int32_t>, std::string> texts;
  const auto start = SteadyClock::now();
  for (size_t i = 0; i < options.prompts.size(); ++i) {
    Expected<std::vector<int32_t>> tokens = encode_prompt(*session, options, options.prompts[i]);
    Expected<RequestId> id =
        tokens ? engine.add_request(std::move(tokens).value(), params) : Expected<RequestId>(tokens.status());
    if (!id) {
      std::fprintf(stderr, "folio run: prompt %zu: %s\n", i, id.error().c_str());
      return 2;
    }
    index_of[*id] = i;
    timings[i].submitted = start;
  }

  int32_t peak_blocks = 0;  // KV blocks in use at the fullest step
  int32_t last_blocks = 0;  // in use when the last step began
  while (engine.has_unfinished_requests()) {
    const std::vector<RequestOutput> outputs = engine.step();
    peak_blocks = std::max(peak_blocks, engine.metrics().kv.num_used_blocks);
    if (engine.has_unfinished_requests()) last_blocks = engine.metrics().kv.num_used_blocks;
    const auto now = SteadyClock::now();
    for (const RequestOutput& out : outputs) {
      const size_t i = index_of.at(out.id);
      if (out.index == 0) timings[i].record(out, now);
      if (streaming) {
        write(out.text_delta);
        if (out.finished) write("\n");
        std::fflush(stdout);
        continue;
      }
      std::string& text = texts[{i, out.index}];
      text += out.text_delta;
      if (out.finished) {
        if (several_per_prompt) {
          std::printf("[%zu.%d] %s\n", i, out.index, text.c_str());
        } else {
          std::printf("[%zu] %s\n", i, text.c_str());
        }
        std::fflush(stdout);
      }
    }
  }
  const double seconds = seconds_between(start, SteadyClock::now());
  if (!options.quiet) {
    if (streaming) {
      print_single_summary(timings[0]);
    } else {
      print_batch_summary(timings, seconds, engine.metrics());
    }
    print_kv_summary(engine.metrics(), peak_blocks, last_blocks);
    const SpeculationMetrics spec = engine.metrics().speculation;
    if (!spec.proposer.empty()) {
      std::fprintf(stderr,
                   "speculation (%s): %lld tokens proposed, %lld accepted (%.0f%%), mean acceptance length %.2f\n",
                   spec.proposer.c_str(), static_cast<long long>(spec.num_draft_tokens),
                   static_cast<long long>(spec.num_accepted_tokens), 100.0 * spec.acceptance_rate(),
                   spec.mean_acceptance_length());
    }
  }
  return 0;
}

}  // namespace

CommandRunner add_run_command(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Generate text from one prompt (streamed) or many (one continuous batch)");
  cmd->add_option("-m,--model", options->model,
                  "GGUF file or Hugging Face model directory (default: SmolLM2-135M-Instruct Q4_1)");
  // One argument per -p, so that `-p a -p b` is two prompts and a stray word is an error.
  cmd->add_option("-p,--prompt", options->prompts, "Prompt text; repeat for several")->allow_extra_args(false);
  cmd->add_option("-f,--file", options->prompt_file, "Prompts, one per line (empty lines skipped)")
      ->check(CLI::ExistingFile);
  cmd->add_option("-n,--max-tokens", options->max_tokens, "Tokens to generate per prompt")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--temp,--temperature", options->temperature, "Sampling temperature (0 = greedy)")
      ->check(CLI::Range(0.0f, 100.0f));
  cmd->add_option("--top-k", options->top_k, "Top-k (<= 0: off)");
  cmd->add_option("--top-p", options->top_p, "Top-p (nucleus)")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--min-p", options->min_p, "Min-p")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--repeat-penalty", options->repetition_penalty, "Repetition penalty")
      ->check(CLI::Range(0.0f, 10.0f));
  cmd->add_option("--seed", options->seed, "Random seed (-1: random); every prompt gets the same one");
  cmd->add_flag("--chat", options->chat, "Apply the model's chat template to every prompt");
  cmd->add_option("--chat-template", options->chat_template_file,
                  "With --chat: a Jinja chat template file to use instead of the model's (Gemma 3 270M's GGUF "
                  "has none: tests/golden/chat/gemma-3-it.jinja)");
  cmd->add_option("--system", options->system_prompt, "System prompt (with --chat)");
  cmd->add_option("--num-samples", options->num_samples, "Parallel samples per prompt (one prefill, forked)")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--beam-width", options->beam_width, "Beam search with this many beams (1: off)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--length-penalty", options->length_penalty, "Beam score = logprob / length^penalty")
      ->check(CLI::Range(-10.0f, 10.0f));
  cmd->add_flag("--early-stopping", options->early_stopping, "Beam search stops once beam-width hypotheses ended");
  cmd->add_option("-t,--threads", options->threads, "CPU threads (0: all)")->check(CLI::Range(0, 1024));
  cmd->add_option("-c,--ctx-size", options->context, "Context size per request (0: the model's)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("-q,--quiet", options->quiet, "No progress or timing lines on stderr");
  add_engine_options(*cmd, options->engine);
  // Checked while parsing, so that a missing prompt gets the usage message like any bad option.
  cmd->callback([options] {
    if (options->prompts.empty() && options->prompt_file.empty()) {
      throw CLI::RequiredError("--prompt (or --file)");
    }
  });
  return [options] { return run(*options); };
}

}  // namespace folio::cli
