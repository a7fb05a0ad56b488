// `folio perplexity`: perplexity of a model over a text file.
// The text is tokenized once (with BOS if the model adds one); the scheme is in engine/perplexity.h.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "cli/model_session.h"
#include "engine/perplexity.h"
#include "executor/kv_pool_sizing.h"

namespace folio::cli {
namespace {

struct PerplexityOptions {
  std::string model;
  std::string text_file;
  int context = 512;
  int threads = 0;
  int max_chunks = 0;
  bool kl = false;           // also run an fp16 cache beside the --kv-cache-dtype one and compare
  std::string kl_reference;  // --kl-reference: compare against this model instead
  DeviceOptions device;
};

// A pool for one chunk of ctx tokens, every position's logits back: on the GPU a chunk is one
// forward; on the CPU 512 tokens a forward, as before there was an executor.
ExecutorRequest perplexity_executor(const PerplexityOptions& options, const ModelConfig& config, KvFormat format) {
  ExecutorRequest request;
  request.device = options.device.device;
  request.kv.format = format;
  request.kv.block_size = kv_default_block_size(format);
  request.max_num_batched_tokens = options.device.device == "cuda" ? options.context : 512;
  // One sequence: its partial block and the blocks one forward fills.
  request.kv.num_staging_blocks =
      (kv_staging_blocks_for(1, request.max_num_batched_tokens, request.kv.block_size) + 1) *
      kv_groups_of(config).num_groups();  // in every block-table group
  request.kv.kv_cache_bytes = kv_bytes_for_tokens(config, request.kv, options.context);
  request.kv_size_given = true;
  request.max_num_seqs = 1;
  request.max_model_len = options.context;
  request.max_logit_rows = options.context;
  request.cuda_graphs = false;  // every forward is a chunk of many tokens
  request.batch_invariant = options.device.batch_invariant;
  request.quantization = options.device.quantization;
  request.tensor_parallel_size = options.device.tensor_parallel_size;
  request.gpu_memory_utilization = options.device.gpu_memory_utilization;
  return request;
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

  if (Status s = check_device(options.device); !s) {
    std::fprintf(stderr, "folio perplexity: %s\n", s.message().c_str());
    return 2;
  }
  if (options.device.device == "host") {
    std::fprintf(stderr, "folio perplexity: --device host runs no model, so it has no perplexity; use cpu or cuda\n");
    return 2;
  }
  Expected<ModelSession> session = open_model_session(options.model, options.threads, false, options.device.device);
  if (!session) {
    std::fprintf(stderr, "folio perplexity: %s\n", session.error().c_str());
    return 1;
  }
  Expected<std::unique_ptr<Executor>> executor = make_executor(
      *session, perplexity_executor(options, session->weights->config(), kv_format_of(options.device)), false);
  if (!executor) {
    std::fprintf(stderr, "folio perplexity: %s\n", executor.error().c_str());
    return 1;
  }
  const Tokenizer& tokenizer = *session->tokenizer;
  const std::vector<int32_t> tokens = tokenizer.encode(text, /*add_special=*/true, /*parse_special=*/false);
  SequenceRunner runner(**executor, options.context, options.device.device == "cuda" ? options.context : 512);
  std::optional<int32_t> bos;
  if (tokenizer.add_bos()) bos = tokenizer.bos_id();
  std::fprintf(stderr, "%zu tokens, chunks of %d, on %s\n", tokens.size(), options.context,
               (*executor)->capabilities().device.c_str());
  const auto start = std::chrono::steady_clock::now();
  auto progress = [&](int64_t done, int64_t total, double perplexity) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "[%lld/%lld] perplexity so far %.4f (%.1f tok/s)\n", static_cast<long long>(done),
                 static_cast<long long>(total), perplexity, done * options.context / elapsed);
  };
  // --kl-reference: another file of the same model (the weights a quantized file was made from).
  std::optional<ModelSession> reference_session;
  if (!options.kl_reference.empty()) {
    Expected<ModelSession> opened =
        open_model_session(options.kl_reference, options.threads, true, options.device.device);
    if (!opened) {
      std::fprintf(stderr, "folio perplexity: --kl-reference: %s\n", opened.error().c_str());
      return 1;
    }
    if (opened->weights->config().vocab_size != session->weights->config().vocab_size) {
      std::fprintf(stderr, "folio perplexity: --kl-reference has a vocabulary of %d tokens, the model %d\n",
                   opened->weights->config().vocab_size, session->weights->config().vocab_size);
      return 2;
    }
    reference_session = std::move(opened).value();
  }
  if (options.kl || reference_session) {
    // The reference: the same model and device with an fp16 cache and the weights as the file
    // has them (no --quantization), or --kl-reference's model, scored on the same chunks.
    ModelSession& reference_model = reference_session ? *reference_session : *session;
    ExecutorRequest reference_request =
        perplexity_executor(options, reference_model.weights->config(), KvFormat::kFp16);
    reference_request.quantization = "none";
    Expected<std::unique_ptr<Executor>> reference = make_executor(reference_model, reference_request, true);
    if (!reference) {
      std::fprintf(stderr, "folio perplexity: %s\n", reference.error().c_str());
      return 1;
    }
    SequenceRunner reference_runner(**reference, options.context,
                                    options.device.device == "cuda" ? options.context : 512);
    Expected<PerplexityComparison> compared =
        compare_perplexity(reference_runner, runner, tokens, options.context, bos, options.max_chunks, progress);
    if (!compared) {
      std::fprintf(stderr, "folio perplexity: %s\n", compared.error().c_str());
      return 2;
    }
    std::string format = std::string(kv_format_name(kv_format_of(options.device))) + " KV";
    std::string reference_format = "fp16 KV";
    if (reference_session) {
      format = "model";
      reference_format = "reference " + options.kl_reference;
    }
    // Only where the weights differ from the file's: fp8, or auto's 4-bit matrices on the GPU
    // (the CPU computes with the file's types either way).
    const std::string& q = options.device.quantization;
    if (!reference_session && (q == "fp8" || (q == "auto" && options.device.device == "cuda"))) {
      format += " + " + q + " weights";
      reference_format += " + file weights as BF16";
    }
    std::printf(
        "perplexity: %s %.4f, %s %.4f (%+.3f%%); mean KL %.6f nats (max %.4f), top-1 agreement %.2f%% over "
        "%lld scored tokens (ctx %d, %lld chunks)\n",
        reference_format.c_str(), compared->reference.perplexity, format.c_str(), compared->test.perplexity,
        100.0 * (compared->test.perplexity / compared->reference.perplexity - 1.0), compared->mean_kl, compared->max_kl,
        100.0 * compared->top1_agreement, static_cast<long long>(compared->test.scored_tokens), options.context,
        static_cast<long long>(compared->test.chunks));
    return 0;
  }
  Expected<PerplexityResult> result =
      compute_perplexity(runner, tokens, options.context, bos, options.max_chunks, progress);
  if (!result) {
    std::fprintf(stderr, "folio perplexity: %s\n", result.error().c_str());
    return 2;
  }
  std::printf("perplexity: %.4f over %lld scored tokens (ctx %d, %lld chunks)\n", result->perplexity,
              static_cast<long long>(result->scored_tokens), options.context, static_cast<long long>(result->chunks));
  return 0;
}

}  // namespace

CommandRunner add_perplexity_command(CLI::App& app) {
  auto options = std::make_shared<PerplexityOptions>();
  CLI::App* cmd = app.add_subcommand("perplexity", "Perplexity of the model over a text file");
  cmd->add_option("-m,--model", options->model,
                  "GGUF file or Hugging Face model directory (default: SmolLM2-135M-Instruct Q4_1)");
  cmd->add_option("-f,--file", options->text_file, "Text file")->required();
  cmd->add_option("-c,--ctx", options->context, "Context size per chunk")->check(CLI::Range(4, 1 << 20));
  cmd->add_option("-t,--threads", options->threads, "CPU threads (0: all)")->check(CLI::Range(0, 1024));
  cmd->add_option("--chunks", options->max_chunks, "Evaluate at most this many chunks (0: all)")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_flag("--kl", options->kl,
                "Also run an fp16 KV cache and the unquantized weights beside --kv-cache-dtype's and --quantization's, "
                "and report both perplexities, the mean KL "
                "divergence of the next-token distributions and their top-1 agreement");
  cmd->add_option("--kl-reference", options->kl_reference,
                  "Compare against another file of the same model (the F16 / BF16 weights a quantized file was "
                  "made from): both perplexities, the mean KL divergence from the reference's next-token "
                  "distributions and their top-1 agreement");
  add_device_options(*cmd, options->device);
  return [options] { return run(*options); };
}

}  // namespace folio::cli
