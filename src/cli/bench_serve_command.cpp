// `folio bench serve`: a serving benchmark against any OpenAI-compatible server (folio serve,
// vLLM, llama.cpp's servers, ...), in the manner of vLLM's `bench serve`. Prompts of chosen
// token lengths arrive by a seeded Poisson process (or all at once, or under a concurrency
// cap), every response streams, and the report gives throughput, TTFT, TPOT, ITL, E2E latency
// and goodput. The prompts are built with a local GGUF tokenizer, which should be the served
// model's, so that the server sees the intended lengths.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/bench_serve_dataset.h"
#include "cli/bench_serve_http_client.h"
#include "cli/bench_serve_metrics.h"
#include "cli/bench_serve_openai.h"
#include "cli/bench_serve_report.h"
#include "cli/bench_serve_runner.h"
#include "cli/commands.h"
#include "cli/model_session.h"
#include "model/gguf_file.h"
#include "model/gguf_tokenizer.h"

namespace folio::cli {
namespace {

struct BenchServeOptions {
  std::string base_url = "http://127.0.0.1:8080";
  std::string endpoint = "/v1/completions";
  std::string model;  // the served name; empty: the first of GET /v1/models
  std::string api_key;
  std::string tokenizer_model;
  std::string dataset = "sharegpt-like";
  int32_t num_prompts = 100;
  int32_t input_len = 128;
  int32_t output_len = 128;
  double scale = 1.0;
  uint64_t seed = 0;
  std::string request_rate = "inf";
  int32_t max_concurrency = 0;
  double temperature = 0.0;
  bool ignore_eos = false;
  bool eos_logit_bias = false;
  std::string extra_body;
  std::vector<std::string> goodput;
  std::string json_path;
  double timeout_s = 1800.0;
  int32_t num_warmups = 1;
  bool progress = false;
};

// The validated form of the options that need more than CLI11's checks.
struct Plan {
  BaseUrl url;
  ApiKind kind = ApiKind::kCompletions;
  double request_rate = std::numeric_limits<double>::infinity();
  ServiceLevelObjectives slo;
  nlohmann::json extra_body = nlohmann::json::object();
};

Expected<double> parse_rate(const std::string& text) {
  if (text == "inf" || text == "infinity") return std::numeric_limits<double>::infinity();
  size_t used = 0;
  double rate = 0.0;
  try {
    rate = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !(rate > 0.0)) {
    return Status::error("--request-rate '" + text + "' is not a positive number of requests per second or 'inf'");
  }
  return rate;
}

Expected<Plan> make_plan(const BenchServeOptions& options) {
  Plan plan;
  Expected<BaseUrl> url = parse_base_url(options.base_url);
  if (!url) return url.status();
  plan.url = *url;
  const std::optional<ApiKind> kind = api_kind_of(options.endpoint);
  if (!kind || options.endpoint.empty() || options.endpoint.front() != '/') {
    return Status::error("--endpoint '" + options.endpoint + "' is neither /v1/completions nor /v1/chat/completions");
  }
  plan.kind = *kind;
  Expected<double> rate = parse_rate(options.request_rate);
  if (!rate) return rate.status();
  plan.request_rate = *rate;
  Expected<ServiceLevelObjectives> slo = parse_service_level_objectives(options.goodput);
  if (!slo) return slo.status();
  plan.slo = *slo;
  if (!options.extra_body.empty()) {
    plan.extra_body = nlohmann::json::parse(options.extra_body, nullptr, /*allow_exceptions=*/false);
    if (!plan.extra_body.is_object()) return Status::error("--extra-body is not a JSON object");
  }
  return plan;
}

// The first model the server lists.
Expected<std::string> ask_model_name(HttpClient& client, double timeout_s) {
  std::optional<HttpOutcome> answer;
  client.get("/v1/models", timeout_s, [&answer](HttpOutcome outcome) { answer = std::move(outcome); });
  client.run();
  const std::string where = "GET " + client.base_url().path_prefix + "/v1/models";
  if (!answer || !answer->error.empty()) {
    return Status::error(where + " failed (" + (answer ? answer->error : "no answer") +
                         "); is the server running there? (--model NAME skips this question)");
  }
  if (!answer->ok()) return Status::error(where + ": " + describe_http_error(answer->status, answer->body));
  const nlohmann::json list = nlohmann::json::parse(answer->body, nullptr, /*allow_exceptions=*/false);
  if (list.is_object() && list.contains("data") && list["data"].is_array() && !list["data"].empty() &&
      list["data"][0].is_object() && list["data"][0].contains("id") && list["data"][0]["id"].is_string()) {
    return list["data"][0]["id"].get<std::string>();
  }
  return Status::error(where + " lists no model; give --model NAME");
}

// Untimed requests first, so that lazy starts (page faults, allocations, JIT) are not measured.
void warm_up(HttpClient& client, const std::vector<ServeBenchRequest>& requests, const ServeRunOptions& run_options,
             int32_t count) {
  if (count <= 0 || requests.empty()) return;
  std::vector<ServeBenchRequest> warmups;
  for (int32_t i = 0; i < count; ++i) {
    ServeBenchRequest r = requests[static_cast<size_t>(i) % requests.size()];
    r.max_tokens = std::min(r.max_tokens, 16);
    warmups.push_back(std::move(r));
  }
  ServeRunOptions quiet = run_options;
  quiet.progress = ProgressLine::Mode::kOff;
  const ServeRunResult result = run_serve_requests(client, warmups, quiet);
  for (const RequestRecord& r : result.records) {
    if (!r.success) {
      std::fprintf(stderr, "bench serve: warm-up request failed: %s\n", r.error.c_str());
      return;
    }
  }
}

std::string dataset_text(const BenchServeOptions& options) {
  char text[160];
  if (options.dataset == "fixed") {
    std::snprintf(text, sizeof(text), "fixed %d in / %d out, seed %llu", options.input_len, options.output_len,
                  static_cast<unsigned long long>(options.seed));
  } else {
    std::snprintf(text, sizeof(text), "sharegpt-like (seeded lognormal lengths, scale %g), seed %llu", options.scale,
                  static_cast<unsigned long long>(options.seed));
  }
  return text;
}

int run(const BenchServeOptions& options) {
  Expected<Plan> plan = make_plan(options);
  if (!plan) {
    std::fprintf(stderr, "folio bench serve: %s\n", plan.error().c_str());
    return 2;
  }
  const std::string tokenizer_path = options.tokenizer_model.empty() ? default_model_path() : options.tokenizer_model;
  if (!std::filesystem::exists(tokenizer_path)) {
    std::fprintf(stderr,
                 "folio bench serve: tokenizer model '%s' does not exist (give --tokenizer-model GGUF, the served "
                 "model's file)\n",
                 tokenizer_path.c_str());
    return 1;
  }
  Expected<GgufFile> file = GgufFile::open(tokenizer_path);
  if (!file) {
    std::fprintf(stderr, "folio bench serve: %s\n", file.error().c_str());
    return 1;
  }
  Expected<Tokenizer> tokenizer = tokenizer_from_gguf(*file);
  if (!tokenizer) {
    std::fprintf(stderr, "folio bench serve: %s\n", tokenizer.error().c_str());
    return 1;
  }

  ServeDatasetOptions dataset;
  dataset.kind = options.dataset == "fixed" ? ServeDataset::kFixed : ServeDataset::kShareGptLike;
  dataset.num_prompts = options.num_prompts;
  dataset.input_len = options.input_len;
  dataset.output_len = options.output_len;
  dataset.scale = options.scale;
  dataset.seed = options.seed;
  const std::vector<ServeBenchRequest> requests = make_serve_requests(dataset, *tokenizer);

  HttpClient client(plan->url, options.api_key);
  std::string model = options.model;
  if (model.empty()) {
    Expected<std::string> name =
        ask_model_name(client, std::min(options.timeout_s > 0 ? options.timeout_s : 30.0, 30.0));
    if (!name) {
      std::fprintf(stderr, "folio bench serve: %s\n", name.error().c_str());
      return 1;
    }
    model = *name;
  }

  ServeRunOptions run_options;
  run_options.endpoint = options.endpoint;
  run_options.kind = plan->kind;
  run_options.fields.model = model;
  run_options.fields.temperature = options.temperature;
  run_options.fields.ignore_eos = options.ignore_eos;
  if (options.eos_logit_bias) run_options.fields.banned_token_ids = tokenizer->end_of_generation_ids();
  run_options.fields.extra_body = plan->extra_body;
  run_options.request_rate = plan->request_rate;
  run_options.max_concurrency = options.max_concurrency;
  run_options.seed = options.seed;
  run_options.timeout_s = options.timeout_s;
  const bool terminal = isatty(fileno(stderr)) != 0;
  run_options.progress = terminal           ? ProgressLine::Mode::kInPlace
                         : options.progress ? ProgressLine::Mode::kLines
                                            : ProgressLine::Mode::kOff;

  warm_up(client, requests, run_options, options.num_warmups);
  const std::string concurrency = options.max_concurrency > 0 ? std::to_string(options.max_concurrency) : "none";
  std::fprintf(stderr, "bench serve: %zu requests to %s%s (model '%s'), request rate %s, max concurrency %s\n",
               requests.size(), options.base_url.c_str(), options.endpoint.c_str(), model.c_str(),
               options.request_rate.c_str(), concurrency.c_str());
  const ServeRunResult result = run_serve_requests(client, requests, run_options);
  const ServeMetrics metrics = compute_serve_metrics(result.records, result.duration_s, plan->slo);

  ServeRunSetup setup;
  setup.base_url = options.base_url;
  setup.endpoint = options.endpoint;
  setup.model = model;
  setup.dataset = dataset_text(options);
  setup.num_prompts = options.num_prompts;
  setup.request_rate = plan->request_rate;
  setup.max_concurrency = options.max_concurrency;
  setup.ignore_eos = options.ignore_eos;
  setup.num_banned_tokens = static_cast<int32_t>(run_options.fields.banned_token_ids.size());
  setup.temperature = options.temperature;
  setup.slo = plan->slo;
  setup.peak_in_flight = result.peak_in_flight;
  print_serve_report(stdout, setup, metrics, result.records);
  if (!options.json_path.empty()) {
    std::ofstream out(options.json_path);
    out << serve_report_json(setup, metrics, result.records).dump(2) << '\n';
    if (!out) {
      std::fprintf(stderr, "folio bench serve: cannot write '%s'\n", options.json_path.c_str());
      return 1;
    }
  }
  // The report stands either way; a run in which nothing succeeded is still a failure.
  return metrics.num_succeeded > 0 ? 0 : 1;
}

}  // namespace

CommandRunner add_bench_serve_command(CLI::App& bench) {
  auto options = std::make_shared<BenchServeOptions>();
  CLI::App* cmd =
      bench.add_subcommand("serve", "Serving benchmark against an OpenAI-compatible server (like vLLM's bench serve)");
  cmd->add_option("--base-url", options->base_url, "The server, http://HOST:PORT[/PREFIX]")->capture_default_str();
  cmd->add_option("--endpoint", options->endpoint, "/v1/completions or /v1/chat/completions")->capture_default_str();
  cmd->add_option("--model", options->model, "Model name sent in requests (default: the first of GET /v1/models)");
  cmd->add_option("--api-key", options->api_key, "Sent as 'Authorization: Bearer KEY'");
  cmd->add_option(
      "--tokenizer-model", options->tokenizer_model,
      "GGUF file whose tokenizer builds the prompts; should be the served model (default: SmolLM2-135M-Instruct Q4_1)");
  cmd->add_option("--dataset", options->dataset,
                  "sharegpt-like (seeded lognormal lengths) or fixed (--input-len/--output-len)")
      ->check(CLI::IsMember({"sharegpt-like", "fixed"}))
      ->capture_default_str();
  cmd->add_option("--num-prompts", options->num_prompts, "Requests to send")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--input-len", options->input_len, "Prompt tokens per request (fixed)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--output-len", options->output_len, "max_tokens per request (fixed)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--scale", options->scale, "Multiplies sharegpt-like prompt and output lengths (means and caps)")
      ->check(CLI::Range(0.01, 4.0))
      ->capture_default_str();
  cmd->add_option("--seed", options->seed, "Seed of lengths, prompt texts and arrival times")->capture_default_str();
  cmd->add_option("--request-rate", options->request_rate, "Requests per second, Poisson arrivals; inf: all at once")
      ->capture_default_str();
  cmd->add_option("--max-concurrency", options->max_concurrency, "Most requests in flight at once (0: no limit)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--temperature", options->temperature, "Sampling temperature (0: greedy)")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  cmd->add_flag("--ignore-eos", options->ignore_eos,
                "Send \"ignore_eos\": true, so that every request generates its max_tokens");
  cmd->add_flag("--eos-logit-bias", options->eos_logit_bias,
                "Send logit_bias -100 on the tokenizer's end-of-generation ids, for servers without ignore_eos "
                "(llama-cpp-python's); folio refuses logit_bias");
  cmd->add_option("--extra-body", options->extra_body, "JSON object merged into every request body");
  cmd->add_option("--goodput", options->goodput, "Service-level objectives in ms: ttft:MS tpot:MS e2el:MS")
      ->expected(1, 3);
  cmd->add_option("--json", options->json_path, "Write the results and every request's record to this file");
  cmd->add_option("--timeout", options->timeout_s, "Seconds a request may take, connect to last byte (0: no limit)")
      ->check(CLI::Range(0.0, 1e7))
      ->capture_default_str();
  cmd->add_option("--num-warmups", options->num_warmups, "Untimed requests before the run")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cmd->add_flag("--progress", options->progress, "Progress on stderr even when it is not a terminal");
  return [options] { return run(*options); };
}

}  // namespace folio::cli
