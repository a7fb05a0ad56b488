// `folio perplexity`: perplexity of a model over a text file.
//
// The text is tokenized once (with BOS if the model adds one) and cut into non-overlapping
// chunks of --ctx tokens. Each chunk is evaluated from an empty cache, its first token replaced
// by BOS when the model uses one, and only the second half of each chunk is scored, so every
// scored token sees at least ctx/2 tokens of context (the scheme llama.cpp's perplexity uses).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "cli/model_session.h"
#include "engine/sequence_runner.h"

namespace folio::cli {
namespace {

struct PerplexityOptions {
  std::string model;
  std::string text_file;
  int context = 512;
  int threads = 0;
  int max_chunks = 0;
};

// -log softmax(logits)[target], in double.
double negative_log_likelihood(const float* logits, int32_t vocab, int32_t target) {
  float max_logit = logits[0];
  for (int32_t i = 1; i < vocab; ++i) max_logit = std::max(max_logit, logits[i]);
  double sum = 0.0;
  for (int32_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max_logit);
  return std::log(sum) - (static_cast<double>(logits[target]) - max_logit);
}

int run(const PerplexityOptions& options) {
  std::ifstream in(options.text_file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "folio perplexity: cannot read '%s'\n", options.text_file.c_str());
    return 2;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();

  Expected<ModelSession> session = open_model_session(options.model, options.threads, false);
  if (!session) {
    std::fprintf(stderr, "folio perplexity: %s\n", session.error().c_str());
    return 1;
  }
  const Tokenizer& tokenizer = *session->tokenizer;
  const std::vector<int32_t> tokens = tokenizer.encode(text, /*add_special=*/true, /*parse_special=*/false);
  const int32_t ctx = options.context;
  int64_t num_chunks = static_cast<int64_t>(tokens.size()) / ctx;
  if (options.max_chunks > 0) num_chunks = std::min<int64_t>(num_chunks, options.max_chunks);
  if (num_chunks == 0) {
    std::fprintf(stderr, "folio perplexity: the text has %zu tokens, fewer than --ctx %d\n",
                 tokens.size(), ctx);
    return 2;
  }
  std::fprintf(stderr, "%zu tokens, %lld chunks of %d\n", tokens.size(),
               static_cast<long long>(num_chunks), ctx);

  const int32_t vocab = session->model->config().vocab_size;
  SequenceRunner runner(*session->model, *session->backend, ctx);
  double total_nll = 0.0;
  int64_t scored = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t chunk = 0; chunk < num_chunks; ++chunk) {
    std::vector<int32_t> window(tokens.begin() + chunk * ctx, tokens.begin() + (chunk + 1) * ctx);
    if (tokenizer.add_bos()) window[0] = tokenizer.bos_id();
    runner.reset();
    Expected<std::vector<float>> logits = runner.append(window, /*all_logits=*/true);
    if (!logits) {
      std::fprintf(stderr, "folio perplexity: %s\n", logits.error().c_str());
      return 1;
    }
    for (int32_t j = ctx / 2; j + 1 < ctx; ++j) {
      // Targets come from the original tokens: the BOS swap only changes the input.
      const int32_t target = tokens[chunk * ctx + j + 1];
      total_nll += negative_log_likelihood(logits->data() + static_cast<size_t>(j) * vocab, vocab, target);
      ++scored;
    }
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "[%lld/%lld] perplexity so far %.4f (%.1f tok/s)\n",
                 static_cast<long long>(chunk + 1), static_cast<long long>(num_chunks),
                 std::exp(total_nll / scored), (chunk + 1) * ctx / elapsed);
  }
  std::printf("perplexity: %.4f over %lld scored tokens (ctx %d, %lld chunks)\n",
              std::exp(total_nll / scored), static_cast<long long>(scored), ctx,
              static_cast<long long>(num_chunks));
  return 0;
}

}  // namespace

CommandRunner add_perplexity_command(CLI::App& app) {
  auto options = std::make_shared<PerplexityOptions>();
  CLI::App* cmd = app.add_subcommand("perplexity", "Perplexity of the model over a text file");
  cmd->add_option("-m,--model", options->model, "GGUF model file (default: SmolLM2-135M-Instruct Q4_1)");
  cmd->add_option("-f,--file", options->text_file, "Text file")->required();
  cmd->add_option("-c,--ctx", options->context, "Context size per chunk")->check(CLI::Range(4, 1 << 20));
  cmd->add_option("-t,--threads", options->threads, "CPU threads (0: all)")->check(CLI::Range(0, 1024));
  cmd->add_option("--chunks", options->max_chunks, "Evaluate at most this many chunks (0: all)")->check(CLI::Range(0, 1 << 30));
  return [options] { return run(*options); };
}

}  // namespace folio::cli
