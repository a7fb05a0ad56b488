// `folio bench spec`: speculative decoding against decoding without it, side by side in one run
// (issue 14). Input-grounded tasks (rewrite or summarize a given paragraph, repeat a given code
// file with comments: the output copies from the prompt), greedy, at several concurrencies: C
// requests in flight, a new one submitted as soon as one ends (a closed loop, as a server under
// C users). Each repetition runs speculation off, then on, each in a fresh engine over the same
// executor; the table gives output tokens per second, the speed-up, the acceptance rate and the
// mean acceptance length (tokens per speculating step), and the k the controller settled on.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "cli/model_session.h"
#include "engine/spec/draft_model_proposer.h"
#include "engine/spec/ngram_proposer.h"
#include "text/chat_prompt.h"
#include "text/chat_template.h"

namespace folio::cli {
namespace {

struct BenchSpecOptions {
  std::string model;
  std::string task = "rewrite";
  std::string corpus = "tests/data/perplexity.txt";
  std::string code_dir = "src/engine";
  std::vector<int32_t> concurrency = {1, 4, 16, 64};
  int32_t num_requests = 0;  // per level; 0: max(2 C, 8)
  int32_t max_tokens = 128;
  int repetitions = 1;
  int threads = 0;
  bool json = false;
  EngineOptions engine;
};

// Paragraphs of the corpus (blank-line separated, 300-1200 characters), or code files cut in
// pieces of about 40 lines, as the task's given text.
std::vector<std::string> source_texts(const BenchSpecOptions& options) {
  std::vector<std::string> texts;
  if (options.task == "code") {
    std::vector<std::string> files = {"engine.cpp",       "scheduler.cpp",        "sampler.cpp",
                                      "model_runner.cpp", "output_processor.cpp", "beam_group.cpp"};
    for (const std::string& name : files) {
      std::ifstream in(options.code_dir + "/" + name);
      std::string line, piece;
      int lines = 0;
      while (std::getline(in, line)) {
        piece += line + "\n";
        if (++lines == 40) {
          texts.push_back(piece);
          piece.clear();
          lines = 0;
        }
      }
    }
    return texts;
  }
  std::ifstream in(options.corpus);
  std::string line, paragraph;
  auto flush = [&] {
    if (paragraph.size() >= 300) texts.push_back(paragraph.substr(0, 1200));
    paragraph.clear();
  };
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      flush();
    } else {
      paragraph += (paragraph.empty() ? "" : " ") + line;
    }
  }
  flush();
  return texts;
}

std::string instruction(const std::string& task, const std::string& text) {
  if (task == "summarize") return "Summarize the following text in a few sentences.\n\n" + text;
  if (task == "code") return "Repeat the following code, adding a short comment above each function.\n\n" + text;
  return "Rewrite the following text, correcting any errors and keeping everything else as it is.\n\n" + text;
}

Expected<std::vector<std::vector<int32_t>>> make_prompts(const ModelSession& session, const BenchSpecOptions& options,
                                                         size_t count) {
  const std::vector<std::string> texts = source_texts(options);
  if (texts.empty())
    return Status::error("no source text for the '" + options.task + "' task (see --corpus, --code-dir)");
  std::optional<ChatTemplate> chat;
  if (session.chat_template) {
    Expected<ChatTemplate> parsed = ChatTemplate::parse(*session.chat_template);
    if (parsed) chat = std::move(parsed).value();
  }
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < count; ++i) {
    const std::string content = instruction(options.task, texts[i % texts.size()]);
    if (chat) {
      const std::vector<ChatMessage> messages = {{"user", content}};
      Expected<std::vector<int32_t>> tokens = chat_prompt_tokens(*chat, *session.tokenizer, messages, true);
      if (!tokens) return tokens.status();
      prompts.push_back(std::move(tokens).value());
    } else {
      prompts.push_back(session.tokenizer->encode(content, true, false));
    }
  }
  return prompts;
}

struct LevelResult {
  double seconds = 0.0;
  int64_t output_tokens = 0;
  SpeculationMetrics speculation;
  double tokens_per_s() const { return seconds > 0 ? output_tokens / seconds : 0.0; }
};

// C requests in flight until all are done.
LevelResult closed_loop(Engine& engine, const std::vector<std::vector<int32_t>>& prompts, int32_t concurrency,
                        const RequestParams& params) {
  LevelResult r;
  size_t next = 0;
  int32_t in_flight = 0;
  const auto start = std::chrono::steady_clock::now();
  while (next < prompts.size() || in_flight > 0) {
    while (in_flight < concurrency && next < prompts.size()) {
      if (engine.add_request(prompts[next++], params)) ++in_flight;
    }
    for (const RequestOutput& out : engine.step()) {
      r.output_tokens += static_cast<int64_t>(out.new_tokens.size());
      if (out.finished) --in_flight;
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.speculation = engine.metrics().speculation;
  return r;
}

// A fresh proposer per run, so that no run inherits the last one's draft prefix cache.
std::unique_ptr<Proposer> fresh_proposer(ExecutorSession& session, const EngineOptions& options) {
  if (session.draft_executor) {
    return std::make_unique<DraftModelProposer>(*session.draft_executor,
                                                session.config.scheduler.max_num_batched_tokens);
  }
  return std::make_unique<NgramProposer>(NgramConfig{options.speculative.ngram_min, options.speculative.ngram_max});
}

int run(const BenchSpecOptions& options) {
  if (!options.engine.speculative.enabled()) {
    std::fprintf(stderr, "folio bench spec: give --speculative ngram or --speculative-model FILE\n");
    return 2;
  }
  ExecutorSession session;
  if (const int rc =
          open_executor_session("bench spec", options.model, options.threads, 0, options.json, options.engine, session);
      rc != 0) {
    return rc;
  }
  Executor& executor = *session.executor;
  const Tokenizer& tokenizer = *session.model.tokenizer;
  RequestParams params;
  params.max_tokens = options.max_tokens;
  params.sampling.temperature = 0.0f;
  EngineConfig off = session.config;
  off.speculative.num_tokens = 0;
  const EngineConfig on = session.config;

  nlohmann::json rows = nlohmann::json::array();
  std::vector<std::string> lines;
  for (int32_t c : options.concurrency) {
    const int32_t n = options.num_requests > 0 ? options.num_requests : std::max(2 * c, 8);
    Expected<std::vector<std::vector<int32_t>>> prompts = make_prompts(session.model, options, static_cast<size_t>(n));
    if (!prompts) {
      std::fprintf(stderr, "folio bench spec: %s\n", prompts.error().c_str());
      return 1;
    }
    LevelResult base, spec;
    for (int rep = 0; rep < options.repetitions; ++rep) {
      Engine plain(executor, tokenizer, off);
      const LevelResult b = closed_loop(plain, *prompts, c, params);
      std::unique_ptr<Proposer> proposer = fresh_proposer(session, options.engine);
      Engine speculative(executor, tokenizer, on, proposer.get());
      const LevelResult s = closed_loop(speculative, *prompts, c, params);
      base.seconds += b.seconds;
      base.output_tokens += b.output_tokens;
      spec.seconds += s.seconds;
      spec.output_tokens += s.output_tokens;
      spec.speculation.num_drafts += s.speculation.num_drafts;
      spec.speculation.num_draft_tokens += s.speculation.num_draft_tokens;
      spec.speculation.num_accepted_tokens += s.speculation.num_accepted_tokens;
      spec.speculation.last_num_tokens = s.speculation.last_num_tokens;
      spec.speculation.proposer_seconds += s.speculation.proposer_seconds;
      std::fprintf(stderr, "bench spec: concurrency %d, repetition %d: %.1f vs %.1f tok/s\n", c, rep + 1,
                   b.tokens_per_s(), s.tokens_per_s());
    }
    const SpeculationMetrics& m = spec.speculation;
    const double speedup = base.tokens_per_s() > 0 ? spec.tokens_per_s() / base.tokens_per_s() : 0.0;
    rows.push_back({{"concurrency", c},
                    {"requests", n},
                    {"off_tokens_per_s", base.tokens_per_s()},
                    {"on_tokens_per_s", spec.tokens_per_s()},
                    {"speedup", speedup},
                    {"acceptance_rate", m.acceptance_rate()},
                    {"mean_acceptance_length", m.mean_acceptance_length()},
                    {"draft_tokens", m.num_draft_tokens},
                    {"accepted_tokens", m.num_accepted_tokens},
                    {"proposer_seconds", m.proposer_seconds},
                    {"last_k", m.last_num_tokens}});
    char line[256];
    std::snprintf(line, sizeof line, "| %d | %d | %.1f | %.1f | %.2fx | %.2f | %.2f | %lld | %d |", c, n,
                  base.tokens_per_s(), spec.tokens_per_s(), speedup, m.acceptance_rate(), m.mean_acceptance_length(),
                  static_cast<long long>(m.num_draft_tokens), m.last_num_tokens);
    lines.push_back(line);
  }
  if (options.json) {
    std::printf("%s\n", rows.dump(2).c_str());
    return 0;
  }
  const SpeculativeOptions& sp = options.engine.speculative;
  std::printf(
      "Task '%s', %d output tokens per request, greedy; proposer %s, up to %d tokens%s; %s, %d repetition(s)\n\n",
      options.task.c_str(), options.max_tokens, sp.model.empty() ? "ngram" : sp.model.c_str(),
      session.config.speculative.num_tokens, sp.fixed ? " (fixed)" : " (adaptive)",
      executor.capabilities().device.c_str(), options.repetitions);
  std::printf(
      "| concurrency | requests | off tok/s | on tok/s | speed-up | acceptance | mean length | draft tokens | last k "
      "|\n"
      "|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string& line : lines) std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace

CommandRunner add_bench_spec_command(CLI::App& bench) {
  auto options = std::make_shared<BenchSpecOptions>();
  options->engine.kv_cache_memory = "1G";
  CLI::App* cmd = bench.add_subcommand("spec", "Speculative decoding against none, side by side, at several loads");
  cmd->add_option("-m,--model", options->model, "Target model (default: SmolLM2-135M-Instruct Q4_1)");
  cmd->add_option("--task", options->task, "rewrite | summarize | code (input-grounded prompts)")
      ->check(CLI::IsMember({"rewrite", "summarize", "code"}))
      ->capture_default_str();
  cmd->add_option("--corpus", options->corpus, "Text whose paragraphs the rewrite/summarize prompts quote")
      ->capture_default_str();
  cmd->add_option("--code-dir", options->code_dir, "Folder of the code task's C++ files")->capture_default_str();
  cmd->add_option("--concurrency", options->concurrency, "Requests in flight, one run per value")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--num-requests", options->num_requests, "Requests per concurrency (0: max(2 C, 8))")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-n,--max-tokens", options->max_tokens, "Output tokens per request")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("-r,--repetitions", options->repetitions, "Off/on pairs per concurrency")->check(CLI::Range(1, 100));
  cmd->add_option("-t,--threads", options->threads, "CPU threads (0: all)")->check(CLI::Range(0, 1024));
  cmd->add_flag("--json", options->json, "Rows as JSON on stdout");
  add_engine_options(*cmd, options->engine);
  return [options] { return run(*options); };
}

}  // namespace folio::cli
