// `folio bench batch`: issue 3's serving benchmarks in one run, on the CPU.
//   a) mixed lengths: continuous batching (all requests at once) vs one request at a time;
//   b) KV utilization on that workload vs contiguous allocation (printed as its own table);
//   c) shared prefix: one long system prompt + many short questions, prefix cache on vs off.
// Repetitions alternate the compared modes, so that drift on a shared machine hits both.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/bench_batch_report.h"
#include "cli/commands.h"
#include "cli/engine_options.h"
#include "cli/model_session.h"
#include "cli/workload_runner.h"

namespace folio::cli {
namespace {

struct BenchBatchOptions {
  std::string model;
  std::string corpus = "tests/data/perplexity.txt";
  std::string workloads = "all";
  std::string dump_path;  // write the workloads here and stop (for baselines run elsewhere)
  MixedLengthShape mixed;
  SharedPrefixShape shared;
  int repetitions = 1;
  int threads = 0;
  bool json = false;
  EngineOptions engine;
};

// The corpus's tokens, or none (prompts become random ids) when the file is missing.
std::vector<int32_t> corpus_tokens(const std::string& path, const Tokenizer& tokenizer) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "bench batch: no corpus at '%s'; prompts are random token ids\n", path.c_str());
    return {};
  }
  std::stringstream text;
  text << in.rdbuf();
  return tokenizer.encode(text.str(), /*add_special=*/false, /*parse_special=*/false);
}

// One JSON object per request: {"workload", "prompt": [ids], "max_tokens"}.
Status dump_workloads(const std::string& path,
                      const std::vector<std::pair<std::string, const std::vector<WorkloadRequest>*>>& sets) {
  std::ofstream out(path);
  if (!out) return Status::error("cannot write '" + path + "'");
  for (const auto& [name, requests] : sets) {
    for (const WorkloadRequest& r : *requests) {
      out << nlohmann::json{{"workload", name}, {"prompt", r.prompt}, {"max_tokens", r.max_tokens}}.dump() << '\n';
    }
  }
  return out ? Status::ok() : Status::error("cannot write '" + path + "'");
}

void describe(const char* name, const std::vector<WorkloadRequest>& requests) {
  std::vector<double> prompt, output;
  for (const WorkloadRequest& r : requests) {
    prompt.push_back(static_cast<double>(r.prompt.size()));
    output.push_back(r.max_tokens);
  }
  const Spread p = spread_of(prompt), o = spread_of(output);
  std::printf(
      "- %s: %zu requests; prompt tokens mean %.0f, median %.0f, range %.0f-%.0f; "
      "output tokens mean %.0f, median %.0f, range %.0f-%.0f\n",
      name, requests.size(), p.mean, p.median, p.min, p.max, o.mean, o.median, o.min, o.max);
}

// The 1-minute load average: on a shared machine, the context every figure needs.
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string first;
  return in >> first ? first : "unknown";
}

// Pages the weights in and lets the thread pool settle before anything is timed.
void warm_up(Executor& executor, const Tokenizer& tokenizer, const EngineConfig& config, int32_t vocab_size,
             Proposer* proposer) {
  MixedLengthShape tiny;
  tiny.num_requests = 4;
  tiny.scale = 0.2;
  Engine engine(executor, tokenizer, config, proposer);
  (void)run_workload(engine, make_mixed_length_workload(tiny, {}, vocab_size), ServingMode::kContinuousBatching);
}

// A fresh engine per run over the one executor: a prefix cache left warm by an earlier run
// would skew the next.
Status run_once(Executor& executor, const Tokenizer& tokenizer, const EngineConfig& config,
                const std::vector<WorkloadRequest>& requests, ServingMode mode, BenchRow& row, Proposer* proposer) {
  Engine engine(executor, tokenizer, config, proposer);
  Expected<WorkloadResult> result = run_workload(engine, requests, mode);
  if (!result) return result.status();
  std::fprintf(stderr, "bench batch: %s, %s: %.1f s, %.1f output tok/s\n", row.workload.c_str(), row.serving.c_str(),
               result->seconds, result->output_tokens_per_s());
  row.runs.push_back(std::move(result).value());
  return Status::ok();
}

int run(const BenchBatchOptions& options) {
  ExecutorSession session;
  if (const int rc = open_executor_session("bench batch", options.model, options.threads, 0, options.json,
                                           options.engine, session);
      rc != 0) {
    return rc;
  }
  const EngineConfig& config = session.config;
  Executor& executor = *session.executor;
  const Tokenizer& tokenizer = *session.model.tokenizer;
  const int32_t vocab = session.model.weights->config().vocab_size;
  const std::vector<int32_t> corpus = corpus_tokens(options.corpus, tokenizer);
  const bool run_mixed = options.workloads != "prefix";
  const bool run_shared = options.workloads != "mixed";
  const std::vector<WorkloadRequest> mixed = make_mixed_length_workload(options.mixed, corpus, vocab);
  const std::vector<WorkloadRequest> shared = make_shared_prefix_workload(options.shared, corpus, vocab);

  if (!options.dump_path.empty()) {
    Status s = dump_workloads(options.dump_path, {{"mixed lengths", &mixed}, {"shared prefix", &shared}});
    if (!s) std::fprintf(stderr, "folio bench batch: %s\n", s.message().c_str());
    return s ? 0 : 1;
  }

  EngineConfig cache_on = config, cache_off = config;
  cache_on.enable_prefix_caching = true;
  cache_off.enable_prefix_caching = false;
  BenchRow batched{"mixed lengths", serving_mode_name(ServingMode::kContinuousBatching), {}, true};
  BenchRow one_at_a_time{"mixed lengths", serving_mode_name(ServingMode::kOneAtATime), {}, true};
  BenchRow prefix_on{"shared prefix", "batched, prefix cache on", {}, false};
  BenchRow prefix_off{"shared prefix", "batched, prefix cache off", {}, false};

  const std::string load_before = load_average();
  Proposer* proposer = session.proposer.get();  // --speculative: every run speculates
  warm_up(executor, tokenizer, config, vocab, proposer);
  for (int rep = 0; rep < options.repetitions; ++rep) {
    std::vector<Status> statuses;
    if (run_mixed) {
      statuses.push_back(
          run_once(executor, tokenizer, config, mixed, ServingMode::kContinuousBatching, batched, proposer));
      statuses.push_back(
          run_once(executor, tokenizer, config, mixed, ServingMode::kOneAtATime, one_at_a_time, proposer));
    }
    if (run_shared) {
      statuses.push_back(
          run_once(executor, tokenizer, cache_on, shared, ServingMode::kContinuousBatching, prefix_on, proposer));
      statuses.push_back(
          run_once(executor, tokenizer, cache_off, shared, ServingMode::kContinuousBatching, prefix_off, proposer));
    }
    for (const Status& s : statuses) {
      if (!s) {
        std::fprintf(stderr, "folio bench batch: %s\n", s.message().c_str());
        return 1;
      }
    }
  }

  std::vector<BenchRow> rows;
  for (BenchRow* row : {&batched, &one_at_a_time, &prefix_on, &prefix_off}) {
    if (!row->runs.empty()) rows.push_back(*row);
  }
  const int32_t max_model_len = session.model.weights->config().context_length;
  if (options.json) {
    print_json(rows, max_model_len);
    return 0;
  }
  std::printf("Workloads (seeded; prompts sliced from %s; greedy, ignore_eos):\n",
              corpus.empty() ? "random token ids" : options.corpus.c_str());
  if (run_mixed) describe(("mixed lengths, scale " + std::to_string(options.mixed.scale).substr(0, 4)).c_str(), mixed);
  if (run_shared) describe("shared prefix", shared);
  const KvPoolLayout pool = executor.kv_pool();
  std::printf(
      "Engine: KV pool %.0f MiB (%s, %.0f bytes per token, %lld token slots with no staging block lent), block size "
      "%d, max %d batched "
      "tokens, max %d sequences, %s, %d repetition(s); load average %s before, %s after\n\n",
      (static_cast<double>(pool.num_blocks - 1) * static_cast<double>(pool.bytes_per_block) +
       static_cast<double>(pool.num_staging_blocks) * static_cast<double>(pool.bytes_per_staging_block)) /
          1048576.0,
      std::string(kv_format_name(pool.format)).c_str(), static_cast<double>(pool.bytes_per_block) / pool.block_size,
      static_cast<long long>(pool.num_pool_token_slots()), pool.block_size, config.scheduler.max_num_batched_tokens,
      config.scheduler.max_num_seqs, executor.capabilities().device.c_str(), options.repetitions, load_before.c_str(),
      load_average().c_str());
  print_markdown(rows, max_model_len);
  std::printf(
      "\nTTFT counts from submission: for \"one at a time\" that is the request's own service time, "
      "without the wait behind earlier requests.\n\n");
  if (run_mixed) std::printf("- %s\n", ratio_text(batched, one_at_a_time).c_str());
  if (run_shared) std::printf("- %s\n", ratio_text(prefix_on, prefix_off).c_str());
  return 0;
}

}  // namespace

CommandRunner add_bench_batch_command(CLI::App& bench) {
  auto options = std::make_shared<BenchBatchOptions>();
  // Large enough for the default workload's 64 requests at once (about 24k tokens), so that
  // the figures measure batching rather than preemption.
  options->engine.kv_cache_memory = "1G";
  CLI::App* cmd =
      bench.add_subcommand("batch", "Serving benchmarks: continuous batching, KV utilization, prefix caching");
  cmd->add_option("-m,--model", options->model,
                  "GGUF file or Hugging Face model directory (default: SmolLM2-135M-Instruct Q4_1)");
  cmd->add_option("--corpus", options->corpus, "Text whose token slices become prompts")->capture_default_str();
  cmd->add_option("--workloads", options->workloads, "all | mixed | prefix")
      ->check(CLI::IsMember({"all", "mixed", "prefix"}))
      ->capture_default_str();
  cmd->add_option("--num-requests", options->mixed.num_requests, "Mixed-length requests")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--scale", options->mixed.scale, "Multiplies mixed prompt and output lengths (means and caps)")
      ->check(CLI::Range(0.01, 4.0))
      ->capture_default_str();
  cmd->add_option("--seed", options->mixed.seed, "Seed of the mixed-length workload")->capture_default_str();
  cmd->add_option("--num-questions", options->shared.num_questions, "Shared-prefix requests")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--prefix-tokens", options->shared.prefix_tokens, "Shared system prompt length")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--question-output-tokens", options->shared.output_tokens, "Output tokens per question")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("-r,--repetitions", options->repetitions, "Runs of each row, alternating")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("-t,--threads", options->threads, "CPU threads (0: all)")->check(CLI::Range(0, 1024));
  cmd->add_flag("--json", options->json, "One JSON object per row on stdout instead of tables");
  cmd->add_option("--dump-workload", options->dump_path, "Write the requests as JSON lines to this file and exit");
  add_engine_options(*cmd, options->engine);
  return [options] { return run(*options); };
}

}  // namespace folio::cli
