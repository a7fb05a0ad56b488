// `folio bench`: prompt processing (ppN) and text generation (tgN) throughput, measured the
// way llama-bench measures them: ppN evaluates N tokens from an empty cache in batches; tgN
// generates N tokens one at a time from an empty cache. Inputs are random token ids.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "cli/model_session.h"
#include "core/peak_memory.h"
#include "engine/sequence_runner.h"
#include "executor/kv_pool_sizing.h"

namespace folio::cli {
namespace {

struct BenchOptions {
  std::string model;
  int prompt_tokens = 512;
  int generation_tokens = 128;
  int repetitions = 5;
  int threads = 0;
  int batch = 512;
  int depth = 0;  // tokens already in the context (untimed) before each test, as llama-bench's -d
  bool json = false;
  DeviceOptions device;
};

struct Figures {
  std::string test;
  std::vector<double> tokens_per_second;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int run(const BenchOptions& options) {
  if (Status s = check_device(options.device); !s) {
    std::fprintf(stderr, "folio bench: %s\n", s.message().c_str());
    return 2;
  }
  Expected<ModelSession> session =
      open_model_session(options.model, options.threads, options.json, options.device.device);
  if (!session) {
    std::fprintf(stderr, "folio bench: %s\n", session.error().c_str());
    return 1;
  }
  const ModelConfig& config = session->weights->config();
  const int32_t vocab = config.vocab_size;
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> random_token(0, vocab - 1);
  const int32_t max_tokens = options.depth + std::max(options.prompt_tokens, options.generation_tokens) + 1;
  // A pool for the one sequence, ppN in batches of -b tokens, tgN one token a step (on the GPU
  // a decode graph of one sequence).
  ExecutorRequest request;
  request.device = options.device.device;
  request.kv.format = kv_format_of(options.device);
  request.kv.block_size = kv_default_block_size(request.kv.format);
  // One sequence: its partial block and the blocks one batch of -b tokens fills.
  request.kv.num_staging_blocks = (kv_staging_blocks_for(1, options.batch, request.kv.block_size) + 1) *
                                  kv_groups_of(config).num_groups();  // in every block-table group
  request.kv.kv_cache_bytes = kv_bytes_for_tokens(config, request.kv, max_tokens);
  request.kv_size_given = true;
  request.max_num_batched_tokens = options.batch;
  request.max_num_seqs = 1;
  request.max_model_len = std::max(max_tokens, config.context_length);
  request.cuda_graphs = !options.device.no_cuda_graphs;
  request.batch_invariant = options.device.batch_invariant;
  request.quantization = options.device.quantization;
  request.tensor_parallel_size = options.device.tensor_parallel_size;
  request.tensor_parallel_devices = options.device.tensor_parallel_devices;
  request.gpu_memory_utilization = options.device.gpu_memory_utilization;
  Expected<std::unique_ptr<Executor>> executor = make_executor(*session, request, options.json);
  if (!executor) {
    std::fprintf(stderr, "folio bench: %s\n", executor.error().c_str());
    return 1;
  }
  const std::string device = (*executor)->capabilities().device;
  SequenceRunner runner(**executor, max_tokens, options.batch);
  using Clock = std::chrono::steady_clock;

  const std::string at_depth = options.depth > 0 ? " @ d" + std::to_string(options.depth) : "";
  Figures pp{"pp" + std::to_string(options.prompt_tokens) + at_depth, {}};
  Figures tg{"tg" + std::to_string(options.generation_tokens) + at_depth, {}};
  // Each test starts from a context of `depth` random tokens, prefilled untimed: decode at 4k
  // context is -n 64 -d 4096.
  auto start_at_depth = [&]() {
    runner.reset();
    if (options.depth == 0) return true;
    std::vector<int32_t> context(static_cast<size_t>(options.depth));
    for (int32_t& t : context) t = random_token(rng);
    return static_cast<bool>(runner.append(context));
  };
  // One untimed warm-up of each, then the timed repetitions.
  for (int rep = -1; rep < options.repetitions; ++rep) {
    if (options.prompt_tokens > 0) {
      std::vector<int32_t> prompt(options.prompt_tokens);
      for (int32_t& t : prompt) t = random_token(rng);
      if (!start_at_depth()) return 1;
      const auto start = Clock::now();
      if (!runner.append(prompt)) return 1;
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      if (rep >= 0) pp.tokens_per_second.push_back(options.prompt_tokens / s);
    }
    if (options.generation_tokens > 0) {
      if (!start_at_depth()) return 1;
      const auto start = Clock::now();
      for (int i = 0; i < options.generation_tokens; ++i) {
        const int32_t token[1] = {random_token(rng)};
        if (!runner.append(token)) return 1;
      }
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      if (rep >= 0) tg.tokens_per_second.push_back(options.generation_tokens / s);
    }
    if (!options.json) std::fprintf(stderr, "bench: %d/%d repetitions done\n", rep + 1, options.repetitions);
  }

  // The process's peak resident set (weights, packed copies, KV pages touched, buffers, code)
  // against the KV pool the runs could fill.
  const double peak_rss_mib = static_cast<double>(peak_resident_bytes()) / (1024.0 * 1024.0);
  const double kv_pool_mib = static_cast<double>(request.kv.kv_cache_bytes) / (1024.0 * 1024.0);
  for (const Figures* f : {&pp, &tg}) {
    if (f->tokens_per_second.empty()) continue;
    const auto [lo, hi] = std::minmax_element(f->tokens_per_second.begin(), f->tokens_per_second.end());
    if (options.json) {
      std::printf(
          "{\"test\": \"%s\", \"median_tps\": %.3f, \"min_tps\": %.3f, \"max_tps\": %.3f, \"runs\": %zu, "
          "\"threads\": %d, \"device\": \"%s\", \"peak_rss_mib\": %.1f, \"kv_pool_mib\": %.1f}\n",
          f->test.c_str(), median(f->tokens_per_second), *lo, *hi, f->tokens_per_second.size(),
          session->backend->num_threads(), device.c_str(), peak_rss_mib, kv_pool_mib);
    } else {
      std::printf("%-8s %10.2f tok/s (median of %zu; min %.2f, max %.2f), %s\n", f->test.c_str(),
                  median(f->tokens_per_second), f->tokens_per_second.size(), *lo, *hi, device.c_str());
    }
  }
  if (!options.json) {
    std::printf("peak RSS %.1f MiB (host memory; a KV pool of %.1f MiB for %d tokens)\n", peak_rss_mib, kv_pool_mib,
                max_tokens);
  }
  return 0;
}

}  // namespace

CommandRunner add_bench_command(CLI::App& app) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "Prompt-processing and generation throughput (llama-bench style)");
  cmd->add_option("-m,--model", options->model,
                  "GGUF file or Hugging Face model directory (default: SmolLM2-135M-Instruct Q4_1)");
  cmd->add_option("-p,--n-prompt", options->prompt_tokens, "Prompt tokens (ppN)")->check(CLI::Range(0, 1 << 16));
  cmd->add_option("-n,--n-gen", options->generation_tokens, "Generated tokens (tgN)")->check(CLI::Range(0, 1 << 16));
  cmd->add_option("-r,--repetitions", options->repetitions, "Timed repetitions")->check(CLI::Range(1, 1000));
  cmd->add_option("-b,--batch", options->batch, "Tokens per forward pass in ppN")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("-d,--depth", options->depth, "Context tokens prefilled (untimed) before each test")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-t,--threads", options->threads, "CPU threads (0: all)")->check(CLI::Range(0, 1024));
  cmd->add_flag("--json", options->json, "One JSON object per test on stdout");
  add_device_options(*cmd, options->device);
  // `folio bench` alone keeps measuring ppN/tgN; `folio bench batch` is the engine's serving
  // benchmark, `folio bench serve` the one against an HTTP server.
  cmd->require_subcommand(0, 1);
  CommandRunner run_batch = add_bench_batch_command(*cmd);
  CLI::App* batch = cmd->get_subcommand("batch");
  CommandRunner run_spec = add_bench_spec_command(*cmd);
  CLI::App* spec = cmd->get_subcommand("spec");
  CommandRunner run_verify = add_bench_verify_command(*cmd);
  CLI::App* verify = cmd->get_subcommand("verify");
  CommandRunner run_host = add_bench_host_command(*cmd);
  CLI::App* host = cmd->get_subcommand("host");
#ifdef FOLIO_HAS_SERVER
  CommandRunner run_serve = add_bench_serve_command(*cmd);
  CLI::App* serve = cmd->get_subcommand("serve");
  return [options, batch, run_batch, spec, run_spec, verify, run_verify, host, run_host, serve, run_serve] {
    if (serve->parsed()) return run_serve();
    if (host->parsed()) return run_host();
    if (verify->parsed()) return run_verify();
    if (spec->parsed()) return run_spec();
    return batch->parsed() ? run_batch() : run(*options);
  };
#else
  return [options, batch, run_batch, spec, run_spec, verify, run_verify, host, run_host] {
    if (host->parsed()) return run_host();
    if (verify->parsed()) return run_verify();
    if (spec->parsed()) return run_spec();
    return batch->parsed() ? run_batch() : run(*options);
  };
#endif
}

}  // namespace folio::cli
