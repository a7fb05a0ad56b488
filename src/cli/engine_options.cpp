#include "cli/engine_options.h"

#include <algorithm>

#include "cli/byte_size.h"
#include "executor/decode_graph_buckets.h"

namespace folio::cli {
namespace {

const CLI::Validator kByteSize(
    [](std::string& text) {
      Expected<int64_t> bytes = parse_byte_size(text);
      return bytes ? std::string() : bytes.error();
    },
    "SIZE", "ByteSize");

const CLI::Validator kKvFormat(
    [](std::string& text) {
      std::string error;
      return parse_kv_format(text, &error) ? std::string() : error;
    },
    "DTYPE", "KvCacheDtype");

}  // namespace

KvFormat kv_format_of(const DeviceOptions& options) {
  return parse_kv_format(options.kv_cache_dtype, nullptr).value();  // checked at parse time
}

void add_device_options(CLI::App& cmd, DeviceOptions& options) {
  const char* group = "Device";
  cmd.add_option("--device", options.device,
                 "Where the model runs: cpu | cuda | host (no model at all: what the engine and the server cost "
                 "by themselves, for benchmarks; its tokens are meaningless)")
      ->check(CLI::IsMember({"cpu", "cuda", "host"}))
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--gpu-memory-utilization", options.gpu_memory_utilization,
                 "With --device cuda: fraction of GPU memory for weights, activations and KV cache")
      ->check(CLI::Range(0.05, 1.0))
      ->capture_default_str()
      ->group(group);
  cmd.add_flag("--no-cuda-graphs", options.no_cuda_graphs, "With --device cuda: run decode steps eagerly")
      ->group(group);
  cmd.add_flag("--batch-invariant", options.batch_invariant,
               "With --device cuda: a request's output does not depend on what else is batched with it "
               "(one split-K-free GEMM algorithm per weight shape, timed at start; decode at small batches is "
               "slower than the default's per-shape heuristic and GEMV). No-op with --device cpu, which is batch "
               "invariant already")
      ->group(group);
  cmd.add_option("--tensor-parallel-size,--tp", options.tensor_parallel_size,
                 "Split the model over this many ranks (Megatron-style: heads, FFN and vocabulary sharded, an "
                 "all-reduce after attention and after the MLP). With --device cpu the ranks are threads sharing "
                 "--threads; with --device cuda one GPU per rank (GPUs 0 to N-1, through NCCL)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--tensor-parallel-devices", options.tensor_parallel_devices,
                 "With --device cuda: the GPU of each rank, comma-separated (default 0,1,...,N-1). The same GPU "
                 "for every rank runs the sharded model on one GPU without NCCL and without CUDA graphs: no "
                 "speed-up, for checking the sharded path where one GPU is all there is")
      ->delimiter(',')
      ->check(CLI::Range(0, 1023))
      ->group(group);
  cmd.add_option(
         "--kv-cache-dtype", options.kv_cache_dtype,
         "How K/V are stored: auto | fp16 | bf16 | fp8 (E4M3, a float scale per token and head, the newest block in "
         "fp16) | int8 (a float scale per token and head) | kivi4 | kivi2 (KIVI: keys per channel, values per token, "
         "the newest block in fp16); "
         "src/kv/README.md. auto is fp16")
      ->check(kKvFormat)
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--quantization", options.quantization,
                 "With --device cuda: auto (GGUF block types stay quantized on the GPU: Q4_0, Q4_1, Q4_K 4-bit "
                 "(W4A16); Q5_0, Q5_1, Q5_K, Q6_K, Q8_0 8-bit (W8A16); F16 / BF16 / F32 as BF16) | none (every weight "
                 "as BF16) | fp8 (the layers' matrices quantized to "
                 "FP8 E4M3 at load with a scale per output channel, activations per token on the fly, FP8 tensor "
                 "cores; compute capability 8.9+). The CPU always computes with the file's own types")
      ->check(CLI::IsMember({"auto", "none", "fp8"}))
      ->capture_default_str()
      ->group(group);
}

void add_engine_options(CLI::App& cmd, EngineOptions& options) {
  const char* group = "Engine";
  options.kv_cache_memory_option = cmd.add_option("--kv-cache-memory", options.kv_cache_memory,
                                                  "KV cache pool, bytes or with K/M/G suffix (binary units)")
                                       ->check(kByteSize)
                                       ->capture_default_str()
                                       ->group(group);
  cmd.add_option(
         "--block-size", options.block_size,
         "Tokens per KV block (default 16; 128 with fp8, kivi4 and kivi2, whose fp16 residual window is one block)")
      ->check(CLI::Range(1, 1024))
      ->group(group);
  options.max_num_batched_tokens_option =
      cmd.add_option("--max-num-batched-tokens", options.max_num_batched_tokens,
                     "Token budget of one forward pass (default 512; 8192 with --device cuda)")
          ->check(CLI::Range(1, 1 << 20))
          ->group(group);
  options.max_num_seqs_option =
      cmd.add_option("--max-num-seqs", options.max_num_seqs,
                     "Requests running at once (default 64; with --device cuda 1024, or fewer when the KV pool holds "
                     "fewer 512-token sequences)")
          ->check(CLI::Range(1, 1 << 16))
          ->group(group);
  options.prefill_tokens_while_decoding_option =
      cmd.add_option("--max-prefill-tokens-while-decoding", options.prefill_tokens_while_decoding,
                     "Most prompt tokens a step carries while other requests decode, so that their next tokens do "
                     "not wait for a long prefill (default: the whole step budget; 512 with --device cuda)")
          ->check(CLI::Range(1, 1 << 20))
          ->group(group);
  options.admission_reserve_option =
      cmd.add_option("--admission-reserve", options.admission_reserve,
                     "Admit a waiting request only while the free KV slots also cover this fraction of every running "
                     "request's remaining max_tokens (SGLang's new-token ratio; it eases to a seventh of the value "
                     "while nothing is preempted and comes back after a preemption). 0: admit what fits now "
                     "(default; 0.7 with --device cuda)")
          ->check(CLI::Range(0.0, 1.0))
          ->group(group);
  cmd.add_flag("--no-prefix-cache", options.no_prefix_cache, "Turn automatic prefix caching off")->group(group);
  cmd.add_option("--prefix-wait-tokens", options.prefix_wait_tokens,
                 "A waiting request that shares at least this many prompt tokens with blocks another request "
                 "computes in the same step waits for that step and reuses them from the prefix cache instead of "
                 "computing them again (default 256; 0: never wait)")
      ->check(CLI::Range(0, 1 << 20))
      ->group(group);
  cmd.add_flag("--no-kv-staging-overlay", options.no_kv_staging_overlay,
               "fp8 / KIVI caches: keep the fp16 staging blocks of unsealed blocks apart instead of letting sealed "
               "blocks use the idle ones' memory (for comparisons)")
      ->group(group);
  cmd.add_flag("--keep-window-blocks", options.keep_window_blocks,
               "Sliding-window layers (Gemma 3) keep every block instead of releasing those out of the window")
      ->group(group);
  cmd.add_option("--swap-space", options.swap_space_gib, "Host KV pool for preemption by swap, GiB")
      ->check(CLI::Range(0.0, 1024.0))
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--preemption", options.preemption, "What a preempted request loses: recompute | swap")
      ->check(CLI::IsMember({"recompute", "swap"}))
      ->capture_default_str()
      ->group(group);
  add_device_options(cmd, options.device);
  const char* spec = "Speculative decoding";
  SpeculativeOptions& sp = options.speculative;
  cmd.add_option("--speculative", sp.method,
                 "Propose tokens for the target to verify: ngram (prompt lookup) | draft (with --speculative-model)")
      ->check(CLI::IsMember({"ngram", "draft"}))
      ->group(spec);
  cmd.add_option("--speculative-model", sp.model,
                 "Draft model (GGUF file or Hugging Face directory) sharing the target's vocabulary")
      ->group(spec);
  cmd.add_option("--num-speculative-tokens", sp.num_tokens, "Most tokens proposed per request and step (default 4)")
      ->check(CLI::Range(1, 32))
      ->group(spec);
  cmd.add_option("--ngram-min", sp.ngram_min, "Shortest n-gram prompt lookup matches")
      ->check(CLI::Range(1, 64))
      ->capture_default_str()
      ->group(spec);
  cmd.add_option("--ngram-max", sp.ngram_max, "Longest n-gram prompt lookup matches")
      ->check(CLI::Range(1, 64))
      ->capture_default_str()
      ->group(spec);
  cmd.add_flag("--no-adaptive-speculation", sp.fixed,
               "Always propose --num-speculative-tokens (default: as many as pay at the measured load and acceptance)")
      ->group(spec);
}

Status check_device(const DeviceOptions& options) {
#ifndef FOLIO_HAS_CUDA
  if (options.device == "cuda") {
    return Status::error(
        "--device cuda: this folio was built without CUDA (configure with nvcc "
        "present, or -DFOLIO_CUDA=ON)");
  }
#else
  (void)options;
#endif
  return Status::ok();
}

Expected<EngineConfig> to_engine_config(const EngineOptions& options, int32_t max_model_len) {
  // The scheduler quietly falls back to recompute when a swap does not fit; asking for swap
  // with no pool at all is a mistake worth saying.
  if (options.preemption == "swap" && options.swap_space_gib <= 0.0) {
    return Status::error("--preemption swap needs a host pool: add --swap-space GiB");
  }
  if (Status s = check_device(options.device); !s) return s;
  const SpeculativeOptions& sp = options.speculative;
  if (sp.method == "draft" && sp.model.empty()) return Status::error("--speculative draft needs --speculative-model");
  if (sp.method == "ngram" && !sp.model.empty()) {
    return Status::error("--speculative ngram and --speculative-model exclude each other");
  }
  if (sp.ngram_min > sp.ngram_max) return Status::error("--ngram-min is larger than --ngram-max");
  if (!sp.enabled() && (sp.num_tokens > 0 || sp.fixed)) {
    return Status::error(
        "--num-speculative-tokens and --no-adaptive-speculation need --speculative or --speculative-model");
  }
  EngineConfig config;
  if (sp.enabled()) {
    config.speculative.num_tokens = sp.num_tokens > 0 ? sp.num_tokens : kDefaultSpeculativeTokens;
    config.speculative.adaptive = !sp.fixed;
  }
  config.enable_prefix_caching = !options.no_prefix_cache;
  config.max_model_len = max_model_len;
  const bool tokens_given =
      options.max_num_batched_tokens_option != nullptr && options.max_num_batched_tokens_option->count() > 0;
  config.scheduler.max_num_batched_tokens =
      options.device.device == "cuda" && !tokens_given ? kCudaBatchedTokens : options.max_num_batched_tokens;
  const bool cuda = options.device.device == "cuda";
  const bool seqs_given = options.max_num_seqs_given();
  config.scheduler.max_num_seqs = cuda && !seqs_given ? kCudaMaxNumSeqs : options.max_num_seqs;
  const bool prefill_given = options.prefill_tokens_while_decoding_option != nullptr &&
                             options.prefill_tokens_while_decoding_option->count() > 0;
  config.scheduler.max_prefill_tokens_while_decoding = prefill_given ? options.prefill_tokens_while_decoding
                                                       : cuda        ? kCudaPrefillTokensWhileDecoding
                                                                     : 0;
  config.scheduler.preemption_mode = options.preemption == "swap" ? PreemptionMode::kSwap : PreemptionMode::kRecompute;
  const bool reserve_given =
      options.admission_reserve_option != nullptr && options.admission_reserve_option->count() > 0;
  const double reserve = cuda && !reserve_given ? kCudaAdmissionReserve : options.admission_reserve;
  config.scheduler.admission_reserve = reserve;
  config.scheduler.admission_reserve_floor = reserve / 7.0;
  config.scheduler.min_deferred_prefix_tokens = options.prefix_wait_tokens;
  return config;
}

int32_t cuda_max_num_seqs(int64_t pool_token_slots) {
  const int64_t fit = std::clamp<int64_t>(pool_token_slots / kCudaPlannedSeqTokens, 16, kCudaMaxNumSeqs);
  int32_t seqs = static_cast<int32_t>(fit);
  while (decode_graph_bucket(seqs) != seqs) --seqs;  // a bucket's graph runs without padding
  return seqs;
}

ExecutorRequest to_executor_request(const EngineOptions& options, const EngineConfig& config) {
  ExecutorRequest request;
  request.device = options.device.device;
  request.kv.kv_cache_bytes = parse_byte_size(options.kv_cache_memory).value();  // checked at parse time
  request.kv.format = kv_format_of(options.device);
  request.kv.block_size = options.block_size > 0 ? options.block_size : kv_default_block_size(request.kv.format);
  request.kv.swap_space_bytes = static_cast<int64_t>(options.swap_space_gib * 1024.0 * 1024.0 * 1024.0);
  request.kv.release_window_blocks = !options.keep_window_blocks;
  request.kv.staging_overlay = !options.no_kv_staging_overlay;
  request.kv.max_num_seqs = config.scheduler.max_num_seqs;  // for the residual formats' staging
  request.kv.max_num_batched_tokens = config.scheduler.max_num_batched_tokens;
  request.kv_size_given = options.kv_cache_memory_option != nullptr && options.kv_cache_memory_option->count() > 0;
  request.gpu_memory_utilization = options.device.gpu_memory_utilization;
  request.max_num_batched_tokens = config.scheduler.max_num_batched_tokens;
  request.max_num_seqs = config.scheduler.max_num_seqs;
  request.max_model_len = config.max_model_len;
  request.cuda_graphs = !options.device.no_cuda_graphs;
  request.batch_invariant = options.device.batch_invariant;
  request.quantization = options.device.quantization;
  request.tensor_parallel_size = options.device.tensor_parallel_size;
  request.tensor_parallel_devices = options.device.tensor_parallel_devices;
  // Every proposal of a step is a row of logits (or a token chosen on the device).
  if (config.speculative.num_tokens > 0) {
    request.max_logit_rows = std::min(config.scheduler.max_num_seqs * (1 + config.speculative.num_tokens), 1024);
  }
  return request;
}

}  // namespace folio::cli
