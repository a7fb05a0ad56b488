// `folio bench verify`: what verifying k proposed tokens costs the target, against one plain
// decode step, at several batch sizes (issue 14's verification-cost table). B requests decode at
// a context of --depth tokens; each step every request carries k random proposals (a proposer
// that is always wrong, so every step emits one token per request and the context grows as in
// plain decoding), through the whole engine step: scheduling, the varlen verification chunk,
// verification and bookkeeping. From the measured ratio t(k) / t(0) the table derives the
// speed-up a proposer with acceptance rate a would give: (1 - a^(k+1)) / (1 - a) tokens per step
// (independent acceptances) over that ratio.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "cli/model_session.h"
#include "engine/spec/proposer.h"
#include "engine/spec/speculation_controller.h"

namespace folio::cli {
namespace {

struct BenchVerifyOptions {
  std::string model;
  std::vector<int32_t> batches = {1, 8, 64};
  int32_t max_k = 8;
  int32_t depth = 512;
  int32_t steps = 32;  // timed steps per (batch, k)
  int threads = 0;
  bool json = false;
  EngineOptions engine;
};

// Proposes as many uniformly random tokens as the engine allows: the verification pass's cost
// with nothing accepted.
class RandomProposer final : public Proposer {
 public:
  explicit RandomProposer(int32_t vocab) : token_(0, vocab - 1) {}
  std::string name() const override { return "random"; }
  void propose(std::span<const ProposalSlot> slots) override {
    for (const ProposalSlot& slot : slots) {
      slot.request->speculation.draft_tokens.resize(static_cast<size_t>(slot.max_tokens));
      for (int32_t& t : slot.request->speculation.draft_tokens) t = token_(rng_);
    }
  }

 private:
  std::mt19937 rng_{42};
  std::uniform_int_distribution<int32_t> token_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The controller's own estimate, with one rate for every position.
double expected_tokens(double acceptance, int32_t k) {
  SpeculationCandidate candidate;
  candidate.acceptance = acceptance;
  return SpeculationController::expected_tokens(candidate, k);
}

// The median wall time of an engine step with `batch` requests decoding at about `depth` tokens
// of context, each with k proposals (k = 0: speculation off). Prefill steps are not timed.
Expected<double> step_seconds(ExecutorSession& session, const BenchVerifyOptions& options, int32_t batch, int32_t k) {
  const int32_t vocab = session.executor->config().vocab_size;
  EngineConfig config = session.config;
  config.speculative.num_tokens = k;
  config.speculative.adaptive = false;
  config.scheduler.max_num_seqs = std::max(config.scheduler.max_num_seqs, batch);
  RandomProposer proposer(vocab);
  Engine engine(*session.executor, *session.model.tokenizer, config, k > 0 ? &proposer : nullptr);
  std::mt19937 rng(7 + static_cast<uint32_t>(batch));
  std::uniform_int_distribution<int32_t> token(0, vocab - 1);
  RequestParams params;
  params.sampling.temperature = 0.0f;
  params.ignore_eos = true;
  // Room for the timed steps with every proposal still allowed (a request near its end gets
  // fewer), after the prefill steps, during which the first requests already decode; then the
  // rest is aborted.
  const int32_t prefill_steps = batch * options.depth / std::max(1, config.scheduler.max_num_batched_tokens);
  params.max_tokens = options.steps + options.max_k + 4 + prefill_steps + 8;
  std::map<RequestId, int32_t> produced;
  for (int32_t i = 0; i < batch; ++i) {
    std::vector<int32_t> prompt(static_cast<size_t>(options.depth));
    for (int32_t& t : prompt) t = token(rng);
    Expected<RequestId> id = engine.add_request(std::move(prompt), params);
    if (!id) return id.status();
    produced[*id] = 0;
  }
  auto all_decoding = [&] {
    return std::all_of(produced.begin(), produced.end(), [](const auto& p) { return p.second > 0; });
  };
  std::vector<double> seconds;
  for (int guard = 0; static_cast<int32_t>(seconds.size()) < options.steps; ++guard) {
    if (!engine.has_unfinished_requests() || guard > 100000) {
      return Status::error("the engine ran out of requests before the timed steps (is the KV pool too small?)");
    }
    const bool timed = all_decoding() && engine.metrics().num_running == batch;
    const auto start = std::chrono::steady_clock::now();
    const std::vector<RequestOutput> outputs = engine.step();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (const RequestOutput& out : outputs) produced[out.id] += static_cast<int32_t>(out.new_tokens.size());
    if (timed) seconds.push_back(s);
  }
  for (const auto& [id, n] : produced) engine.abort(id);
  while (engine.has_unfinished_requests()) engine.step();
  return median(seconds);
}

int run(BenchVerifyOptions options) {
  // The session is opened for speculation with up to max_k tokens (its logit rows sized so);
  // --max-k 0 times plain decode steps alone, in a session without speculation (what
  // bench/decode_profile.py --batch profiles).
  if (options.max_k > 0) {
    options.engine.speculative.method = "ngram";
    options.engine.speculative.num_tokens = options.max_k;
    options.engine.speculative.fixed = true;
  }
  options.engine.max_num_seqs =
      std::max(options.engine.max_num_seqs, *std::max_element(options.batches.begin(), options.batches.end()));
  options.engine.max_num_seqs_set = true;  // not the GPU's default: every batch must fit
  ExecutorSession session;
  if (const int rc = open_executor_session("bench verify", options.model, options.threads, 0, options.json,
                                           options.engine, session);
      rc != 0) {
    return rc;
  }
  const double acceptances[] = {0.6, 0.7, 0.8};
  nlohmann::json rows = nlohmann::json::array();
  std::vector<std::string> lines;
  for (int32_t batch : options.batches) {
    double decode = 0.0;
    std::vector<double> best(std::size(acceptances), 1.0);
    std::vector<int32_t> best_k(std::size(acceptances), 0);
    for (int32_t k = 0; k <= options.max_k; ++k) {
      Expected<double> s = step_seconds(session, options, batch, k);
      if (!s) {
        std::fprintf(stderr, "folio bench verify: %s\n", s.error().c_str());
        return 1;
      }
      if (k == 0) decode = *s;
      const double ratio = decode > 0 ? *s / decode : 0.0;
      nlohmann::json row = {{"batch", batch}, {"k", k}, {"step_ms", *s * 1e3}, {"vs_decode", ratio}};
      char line[256];
      int at = std::snprintf(line, sizeof line, "| %d | %d | %.3f | %.2f |", batch, k, *s * 1e3, ratio);
      for (size_t a = 0; a < std::size(acceptances); ++a) {
        const double speedup = ratio > 0 ? expected_tokens(acceptances[a], k) / ratio : 0.0;
        row["speedup_at_" + std::to_string(acceptances[a]).substr(0, 3)] = speedup;
        at += std::snprintf(line + at, sizeof line - static_cast<size_t>(at), " %.2fx |", speedup);
        if (speedup > best[a]) best[a] = speedup, best_k[a] = k;
      }
      rows.push_back(row);
      lines.push_back(line);
      if (!options.json) {
        std::fprintf(stderr, "bench verify: batch %d, k %d: %.3f ms a step (%.2fx decode)\n", batch, k, *s * 1e3,
                     ratio);
      }
    }
    char line[256];
    std::snprintf(line, sizeof line, "| %d | best | | | k=%d: %.2fx | k=%d: %.2fx | k=%d: %.2fx |", batch, best_k[0],
                  best[0], best_k[1], best[1], best_k[2], best[2]);
    lines.push_back(line);
  }
  if (options.json) {
    std::printf("%s\n", rows.dump(2).c_str());
    return 0;
  }
  std::printf(
      "Verification cost at depth %d, %s; speed-up = expected tokens per step at acceptance a / (t(k) / t(0))\n\n",
      options.depth, session.executor->capabilities().device.c_str());
  std::printf(
      "| batch | k | step ms | vs decode | speed-up a=0.6 | a=0.7 | a=0.8 |\n"
      "|---|---|---|---|---|---|---|\n");
  for (const std::string& line : lines) std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace

CommandRunner add_bench_verify_command(CLI::App& bench) {
  auto options = std::make_shared<BenchVerifyOptions>();
  options->engine.kv_cache_memory = "1G";
  CLI::App* cmd =
      bench.add_subcommand("verify", "What verifying k proposed tokens costs against one decode step, per batch size");
  cmd->add_option("-m,--model", options->model, "Target model (default: SmolLM2-135M-Instruct Q4_1)");
  cmd->add_option("--batch", options->batches, "Requests decoding together, one table per value")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--max-k", options->max_k, "Proposed tokens per request: 0 (plain decode) to this")
      ->check(CLI::Range(0, 32))
      ->capture_default_str();
  cmd->add_option("-d,--depth", options->depth, "Prompt tokens of each request (the context decoded at)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--steps", options->steps, "Timed steps per batch and k (the median is reported)")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  cmd->add_option("-t,--threads", options->threads, "CPU threads (0: all)")->check(CLI::Range(0, 1024));
  cmd->add_flag("--json", options->json, "Rows as JSON on stdout");
  add_engine_options(*cmd, options->engine);
  return [options] { return run(*options); };
}

}  // namespace folio::cli
