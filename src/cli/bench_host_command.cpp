// `folio bench host`: what the engine itself costs a step, with no model behind it (issue 16:
// the host's share of a GPU decode step). --seqs requests of --prompt random tokens each ask for
// --output tokens (ignore_eos) at once, as the serving shapes do; the executor is
// HostOnlyExecutor, which samples "on the device" as the CUDA executor does, so each step is
// scheduling, block tables, the batch and its sampling plan, and the tokens' bookkeeping and
// detokenization, on this machine's CPU. It reports the wall time of the steps that decode the
// whole batch (median, p90) and of the steps that carry prefill chunks, beside the number a GPU
// step is compared with: the share is host time / (host + device) time when they do not overlap.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/host_only_executor.h"
#include "cli/model_session.h"
#include "cli/percentile.h"
#include "engine/engine.h"

namespace folio::cli {
namespace {

struct BenchHostOptions {
  std::string model;
  int32_t seqs = 512;
  int32_t prompt = 1000;
  int32_t output = 1000;
  int32_t max_num_batched_tokens = 8192;
  int32_t block_size = 16;
  bool json = false;
};

int run(const BenchHostOptions& options) {
  Expected<ModelSession> session = open_model_session(options.model, 1, /*quiet=*/true);
  if (!session) {
    std::fprintf(stderr, "folio bench host: %s\n", session.error().c_str());
    return 1;
  }
  const ModelConfig& model = session->weights->config();
  const int32_t context = options.prompt + options.output;
  if (model.context_length > 0 && context > model.context_length) {
    std::fprintf(stderr, "folio bench host: --prompt + --output (%d) exceed the model's context (%d)\n", context,
                 model.context_length);
    return 2;
  }
  // Room for every request at its full length at once, so that nothing is preempted: the
  // engine's steady work, not its recovery, is what this measures.
  const int32_t groups = kv_groups_of(model).num_groups();
  const int64_t blocks =
      static_cast<int64_t>(options.seqs) * ((context + options.block_size - 1) / options.block_size) * groups + 1;
  if (blocks > (int64_t{1} << 30)) {
    std::fprintf(stderr, "folio bench host: %lld KV blocks is too many; fewer --seqs or tokens\n",
                 static_cast<long long>(blocks));
    return 2;
  }
  HostOnlyExecutor executor(model, static_cast<int32_t>(blocks), options.block_size);
  EngineConfig config;
  config.max_model_len = context;
  config.scheduler.max_num_seqs = options.seqs;
  config.scheduler.max_num_batched_tokens = options.max_num_batched_tokens;
  Engine engine(executor, *session->tokenizer, config);

  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> token(0, model.vocab_size - 1);
  RequestParams params;
  params.sampling.temperature = 0.0f;
  params.ignore_eos = true;
  params.max_tokens = options.output;
  for (int32_t i = 0; i < options.seqs; ++i) {
    std::vector<int32_t> prompt(static_cast<size_t>(options.prompt));
    for (int32_t& t : prompt) t = token(rng);
    if (Expected<RequestId> id = engine.add_request(std::move(prompt), params); !id) {
      std::fprintf(stderr, "folio bench host: %s\n", id.error().c_str());
      return 1;
    }
  }
  std::vector<double> decode_ms, mixed_ms;
  int64_t output_tokens = 0, steps = 0;
  const int64_t expected = static_cast<int64_t>(options.seqs) * options.output;
  int64_t next_progress = expected / 10;
  const auto start = std::chrono::steady_clock::now();
  while (engine.has_unfinished_requests()) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<RequestOutput> outputs = engine.step();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ++steps;
    for (const RequestOutput& out : outputs) output_tokens += static_cast<int64_t>(out.new_tokens.size());
    // A full decode step: one token and one logit row per running request, all of them.
    const bool full_decode = executor.last_tokens() == options.seqs && executor.last_logit_rows() == options.seqs;
    if (full_decode) {
      decode_ms.push_back(ms);
    } else if (executor.last_tokens() > executor.last_logit_rows()) {
      mixed_ms.push_back(ms);
    }
    if (!options.json && output_tokens >= next_progress) {
      std::fprintf(stderr, "\r  %lld of %lld tokens, %lld steps", static_cast<long long>(output_tokens),
                   static_cast<long long>(expected), static_cast<long long>(steps));
      next_progress += expected / 10;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!options.json) std::fprintf(stderr, "\n");
  if (Status s = engine.check_invariants(); !s) {
    std::fprintf(stderr, "folio bench host: the engine's invariants failed after the run: %s\n", s.message().c_str());
    return 1;
  }
  const double decode_p50 = percentile(decode_ms, 50.0), decode_p90 = percentile(decode_ms, 90.0);
  const double mixed_p50 = percentile(mixed_ms, 50.0), mixed_p90 = percentile(mixed_ms, 90.0);
  if (options.json) {
    nlohmann::json row = {{"seqs", options.seqs},
                          {"prompt", options.prompt},
                          {"output", options.output},
                          {"steps", steps},
                          {"output_tokens", output_tokens},
                          {"seconds", seconds},
                          {"decode_steps", decode_ms.size()},
                          {"decode_step_ms_p50", decode_p50},
                          {"decode_step_ms_p90", decode_p90},
                          {"mixed_steps", mixed_ms.size()},
                          {"mixed_step_ms_p50", mixed_p50},
                          {"mixed_step_ms_p90", mixed_p90}};
    std::printf("%s\n", row.dump().c_str());
  } else {
    std::printf("engine host cost, %d requests x (%d in, %d out), max %d batched tokens, no model:\n", options.seqs,
                options.prompt, options.output, options.max_num_batched_tokens);
    std::printf("  %lld steps, %lld output tokens in %.2f s (%.0f tokens/s the host alone sustains)\n",
                static_cast<long long>(steps), static_cast<long long>(output_tokens), seconds,
                static_cast<double>(output_tokens) / seconds);
    std::printf("  full decode steps (%zu): p50 %.3f ms, p90 %.3f ms (%.2f us a sequence)\n", decode_ms.size(),
                decode_p50, decode_p90, 1e3 * decode_p50 / options.seqs);
    std::printf("  steps with prefill chunks (%zu): p50 %.3f ms, p90 %.3f ms\n", mixed_ms.size(), mixed_p50, mixed_p90);
  }
  return output_tokens == expected ? 0 : 1;
}

}  // namespace

CommandRunner add_bench_host_command(CLI::App& bench) {
  auto options = std::make_shared<BenchHostOptions>();
  CLI::App* cmd = bench.add_subcommand("host", "What the engine itself costs a step, with no model behind it");
  cmd->add_option("-m,--model", options->model,
                  "Model whose configuration and tokenizer are used (default: SmolLM2-135M-Instruct Q4_1)");
  cmd->add_option("--seqs", options->seqs, "Requests, all running at once")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("-p,--prompt", options->prompt, "Prompt tokens of each request")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("-n,--output", options->output, "Output tokens of each request")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", options->max_num_batched_tokens, "Tokens per step")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--block-size", options->block_size, "Tokens per KV block")
      ->check(CLI::IsMember({8, 16, 32, 64, 128}))
      ->capture_default_str();
  cmd->add_flag("--json", options->json, "One JSON object on stdout");
  return [options] { return run(*options); };
}

}  // namespace folio::cli
