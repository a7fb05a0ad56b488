// Tensor parallelism on the GPU (backend/cuda/cuda_tensor_parallel_executor.h) against one
// unsplit GPU executor:
//  - golden prompts: for each rank count, weight format and KV format, the last prompt
//    position's logits within float error of TP = 1 (the same BF16 weights; only the order of
//    the partial sums differs), the greedy tokens the same (or parting where TP = 1 itself
//    hesitated), and the ranks' GPU sampling equal to the host argmax of their gathered logits;
//  - the engine on TP = 2 (pinned GEMMs, so that a row's bits do not depend on its batch):
//    batch invariance, a prefix-cache hit equal to a cold run, preemption by recompute and by
//    swap equal to unconstrained runs, and the pool empty after each.
// Ranks go one per GPU through NCCL where the machine has enough GPUs, otherwise all on GPU 0
// (SameDeviceCollectives); --ranks 1 runs the NCCL path with one rank.
//
//   folio_cuda_e2e tp [--model SmolLM2.gguf] [--ranks 1,2,3,4] [--tokens 16] [--cases 3]
//   folio_cuda_e2e tp-bench [--ranks N]   the all-reduce alone (below)
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "backend/cuda/cuda_tensor_parallel_executor.h"
#include "backend/cuda/nccl_collectives.h"
#include "e2e_common.h"
#include "engine/engine.h"
#include "engine_helpers.h"
#include "executor/kv_pool_sizing.h"
#include "model/synth_model.h"

namespace folio::e2e {
namespace {

struct TpSetup {
  PoolFormat pool;
  cuda::WeightFormat weights = cuda::WeightFormat::kBf16;
  cuda::GemmPolicy gemm;
  int32_t kv_blocks = 64;
  int32_t swap_blocks = 0;
  int32_t max_num_seqs = 64;
  int32_t max_tokens = 512;
};

cuda::CudaExecutorOptions options_for(const ModelWeights& model, const TpSetup& s) {
  const int64_t block_bytes = kv_bytes_per_block(model.config(), s.pool.block_size, s.pool.format, false);
  const int64_t staging_bytes =
      static_cast<int64_t>(s.pool.num_staging) *
      static_cast<int64_t>(
          kv_cache_shape(model.config(), 1, s.pool.block_size, s.pool.format, 0, false).bytes_per_staging_block());
  cuda::CudaExecutorOptions o;
  o.kv_cache_bytes = s.kv_blocks * block_bytes + staging_bytes;
  o.swap_space_bytes = s.swap_blocks > 0 ? s.swap_blocks * block_bytes + staging_bytes : 0;
  o.block_size = s.pool.block_size;
  o.kv_format = s.pool.format;
  o.num_staging_blocks = s.pool.num_staging;
  o.release_window_blocks = false;
  o.max_num_seqs = s.max_num_seqs;
  o.max_num_batched_tokens = s.max_tokens;
  o.gemm = s.gemm;
  o.weight_format = s.weights;
  o.quiet = true;
  return o;
}

std::unique_ptr<Executor> make_tp(const ModelWeights& model, int32_t ranks, const TpSetup& s, std::string& placement) {
  int gpus = 0;
  cudaGetDeviceCount(&gpus);
  // One GPU per rank where there are enough (NCCL), every rank on GPU 0 otherwise; one rank
  // alone goes through NCCL too (the same code path with N = 1).
  std::vector<int32_t> devices;
  for (int32_t r = 0; r < ranks; ++r) devices.push_back(gpus >= ranks ? r : 0);
  Expected<std::unique_ptr<cuda::CudaTensorParallelExecutor>> tp =
      cuda::CudaTensorParallelExecutor::create(model, devices, options_for(model, s));
  if (!tp) {
    std::fprintf(stderr, "tp: %s\n", tp.error().c_str());
    return nullptr;
  }
  placement = (*tp)->collectives_name();
  return std::move(tp).value();
}

std::unique_ptr<Executor> make_one(const ModelWeights& model, const TpSetup& s) {
  Expected<std::unique_ptr<cuda::CudaExecutor>> one = cuda::CudaExecutor::create(model, options_for(model, s));
  if (!one) {
    std::fprintf(stderr, "tp: %s\n", one.error().c_str());
    std::exit(2);
  }
  return std::move(one).value();
}

double relative_error(const std::vector<float>& got, const std::vector<float>& ref) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(got[i]) - ref[i];
    diff += d * d;
    norm += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

// The first step at which two token sequences part (their length when they do not).
size_t first_difference(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

void golden(const LoadedModel& loaded, const nlohmann::json& cases, const std::vector<int32_t>& rank_counts,
            int32_t steps, Tally& tally) {
  const ModelWeights& model = *loaded.model;
  struct Variant {
    const char* name;
    TpSetup setup;
    int base = -1;  // lossy formats: the variant this one quantizes further (its weights in BF16, or its KV in fp16)
  };
  // (KIVI needs the engine's seals: the engine checks below run it.)
  std::vector<Variant> variants = {{"bf16 weights, fp16 KV", {}},
                                   {"file's weights (auto), fp16 KV", {}},
                                   {"bf16 weights, fp8 KV", {}, 0},
                                   {"file's weights (auto), int8 KV", {}, 1},
                                   {"fp8 weights (W8A8), fp16 KV", {}, 0}};
  variants[1].setup.weights = cuda::WeightFormat::kInt4;
  variants[2].setup.pool.format = KvFormat::kFp8E4M3;
  variants[3].setup.weights = cuda::WeightFormat::kInt4;
  variants[3].setup.pool.format = KvFormat::kInt8;
  variants[4].setup.weights = cuda::WeightFormat::kFp8E4M3;
  std::printf("%-34s %5s %-10s %-8s %12s %10s %8s %10s\n", "variant", "ranks", "placement", "case", "logit relerr",
              "tolerance", "greedy", "margin");
  for (const nlohmann::json& c : cases) {
    const std::string name = c["name"];
    const std::vector<int32_t> prompt = c["prompt_ids"];
    TpSetup plain;
    plain.kv_blocks = static_cast<int32_t>((prompt.size() + steps) / kBlock + 8);
    plain.max_tokens = std::max<int32_t>(512, static_cast<int32_t>(prompt.size()));
    // Each variant's unsplit run: a lossy format's own error on this prompt (against its base
    // variant's unsplit run) is what its sharded runs are judged by.
    std::vector<Greedy> unsplit;
    for (const Variant& v : variants) {
      TpSetup s = v.setup;
      s.kv_blocks = plain.kv_blocks;
      s.max_tokens = plain.max_tokens;
      // fp8's newest block waits in fp16 staging (greedy_run.cpp lends block i staging i).
      if (kv_format_has_residual(s.pool.format)) s.pool.num_staging = s.kv_blocks;
      std::unique_ptr<Executor> one = make_one(model, s);
      const Greedy ref = run_greedy(*one, prompt, steps);
      one.reset();
      unsplit.push_back(ref);
      // Lossless formats: float error of summing partial products in another order, through
      // BF16 activations. Lossy ones also round differently when split (FP8 KV: an element one
      // ulp apart in BF16 may land on the other side of an E4M3 step; W8A8: each rank's slice
      // of O's and down's input gets its own per-token scale), so a sharded run may differ from
      // TP = 1 by up to 1.5x the format's own error against fp16 KV and BF16 weights.
      const double own =
          v.base >= 0 ? relative_error(ref.last_prompt_logits, unsplit[static_cast<size_t>(v.base)].last_prompt_logits)
                      : 0.0;
      const double tolerance = std::max(1e-2, 1.5 * own);
      for (int32_t ranks : rank_counts) {
        std::string placement;
        std::unique_ptr<Executor> tp = make_tp(model, ranks, s, placement);
        const std::string what =
            std::string(v.name) + ", TP=" + std::to_string(ranks) + " (" + placement + "), " + name;
        if (tp == nullptr) {
          tally.check(false, what + ": executor not created");
          continue;
        }
        const Greedy got = run_greedy(*tp, prompt, steps);
        const Greedy again = run_greedy(*tp, prompt, steps);
        std::vector<int32_t> sampled;
        for (const SampledToken& t : run_device_greedy(*tp, prompt, steps)) sampled.push_back(t.token);
        tp.reset();
        const double err = relative_error(got.last_prompt_logits, ref.last_prompt_logits);
        const size_t first = first_difference(ref.tokens, got.tokens);
        const bool same = first == ref.tokens.size();
        const float margin = same ? 0.0f : ref.margins[first];
        std::printf("%-34s %5d %-10s %-8s %12.3e %10.3e %8s %10s\n", v.name, ranks, placement.c_str(), name.c_str(),
                    err, tolerance, same ? "same" : ("@" + std::to_string(first)).c_str(),
                    same ? "-" : std::to_string(margin).c_str());
        tally.check(std::isfinite(err) && err < tolerance, what + ": logits relerr " + std::to_string(err) + " < " +
                                                               std::to_string(tolerance) + " (format's own error " +
                                                               std::to_string(own) + ")");
        tally.check(same || margin < 0.3f, what + ": greedy " +
                                               (same ? "identical for " + std::to_string(steps) + " tokens"
                                                     : "parts at step " + std::to_string(first) +
                                                           " where TP=1's top-2 margin is " + std::to_string(margin)));
        const size_t rerun = first_difference(got.tokens, again.tokens);
        tally.check(again.last_prompt_logits == got.last_prompt_logits && rerun == got.tokens.size(),
                    what + ": a second run is bit-identical" +
                        (rerun == got.tokens.size() ? "" : " (tokens part at step " + std::to_string(rerun) + ")"));
        const size_t on_device = first_difference(got.tokens, sampled);
        tally.check(on_device == got.tokens.size(),
                    what + ": GPU sampling on the ranks equals the host argmax" +
                        (on_device == got.tokens.size() ? ""
                                                        : " (parts at step " + std::to_string(on_device) + ": host " +
                                                              std::to_string(got.tokens[on_device]) + " margin " +
                                                              std::to_string(got.margins[on_device]) + ", device " +
                                                              std::to_string(sampled[on_device]) + ")"));
      }
    }
  }
}

void engine_checks(const LoadedModel& loaded, Tally& tally) {
  const ModelWeights& model = *loaded.model;
  const Tokenizer& tokenizer = *loaded.tokenizer;
  std::ifstream in(std::string(FOLIO_SOURCE_DIR) + "/tests/data/perplexity.txt");
  std::stringstream text;
  text << in.rdbuf();
  const std::vector<int32_t> corpus = tokenizer.encode(text.str(), false, false);
  auto slice = [&](size_t offset, size_t length) {
    const size_t at = offset % (corpus.size() - length);
    return std::vector<int32_t>(corpus.begin() + static_cast<std::ptrdiff_t>(at),
                                corpus.begin() + static_cast<std::ptrdiff_t>(at + length));
  };
  // Pinned, untuned: every executor below pins the same algorithm per shape without timing.
  TpSetup roomy_setup;
  roomy_setup.gemm.batch_invariant = true;
  roomy_setup.gemm.tune_pinned = false;
  roomy_setup.kv_blocks = 1024;
  std::string placement;
  std::unique_ptr<Executor> roomy = make_tp(model, 2, roomy_setup, placement);
  if (roomy == nullptr) {
    tally.check(false, "engine on TP=2: executor not created");
    return;
  }
  const std::string tag = " [TP=2, " + placement + "]";
  auto alone = [&](const std::vector<std::vector<int32_t>>& prompts, const RequestParams& params) {
    std::vector<std::vector<int32_t>> out;
    for (const auto& prompt : prompts) {
      Engine engine(*roomy, tokenizer, EngineConfig{});
      out.push_back(engine.generate({prompt}, params)[0].tokens);
    }
    return out;
  };
  {  // Batch invariance: 16 requests, chunked prefill beside decodes, against each alone.
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 16; ++i) prompts.push_back(slice(97 * i, 3 + (i * 37) % 150));
    const RequestParams params = greedy(10);
    const auto reference = alone(prompts, params);
    EngineConfig config;
    config.scheduler.max_num_batched_tokens = 128;
    Engine engine(*roomy, tokenizer, config);
    const std::vector<Generation> batched = engine.generate(prompts, params);
    int same = 0;
    for (size_t i = 0; i < prompts.size(); ++i) same += batched[i].tokens == reference[i];
    tally.check(same == 16, "batch invariance" + tag + ": " + std::to_string(same) + "/16 equal alone");
    tally.check(pool_empty(engine), "batch invariance" + tag + ": pool empty after");
  }
  {  // KIVI-2 sharded (blocks of 32 sealed as they fill, each rank quantizing its KV heads):
     // a batch with chunked prefills equals each request alone.
    TpSetup kivi_setup = roomy_setup;
    kivi_setup.pool = PoolFormat{KvFormat::kKivi2, 32, 96, false};
    kivi_setup.kv_blocks = 512;
    std::string kivi_placement;
    std::unique_ptr<Executor> kivi = make_tp(model, 2, kivi_setup, kivi_placement);
    if (kivi == nullptr) {
      tally.check(false, "kivi2" + tag + ": executor not created");
    } else {
      std::vector<std::vector<int32_t>> prompts;
      for (int i = 0; i < 8; ++i) prompts.push_back(slice(211 * i, 40 + 23 * i));
      const RequestParams params = greedy(40);
      std::vector<std::vector<int32_t>> reference;
      for (const auto& prompt : prompts) {
        Engine engine(*kivi, tokenizer, EngineConfig{});
        reference.push_back(engine.generate({prompt}, params)[0].tokens);
      }
      EngineConfig config;
      config.scheduler.max_num_batched_tokens = 96;
      Engine engine(*kivi, tokenizer, config);
      const std::vector<Generation> batched = engine.generate(prompts, params);
      int same = 0;
      for (size_t i = 0; i < prompts.size(); ++i) same += batched[i].tokens == reference[i];
      tally.check(same == 8, "kivi2 batch invariance" + tag + ": " + std::to_string(same) + "/8 equal alone");
      tally.check(pool_empty(engine), "kivi2" + tag + ": pool empty after");
    }
  }
  {  // Prefix cache: the second request reuses 992 tokens' blocks and equals a cold run.
    std::vector<int32_t> first = slice(1000, 1000), second = first;
    const auto a = slice(5000, 20), b = slice(6000, 25);
    first.insert(first.end(), a.begin(), a.end());
    second.insert(second.end(), b.begin(), b.end());
    const RequestParams params = greedy(10);
    Engine engine(*roomy, tokenizer, EngineConfig{});
    engine.generate({first}, params);
    const int64_t before = engine.metrics().num_prompt_tokens_computed;
    const std::vector<int32_t> warm = engine.generate({second}, params)[0].tokens;
    const int64_t computed = engine.metrics().num_prompt_tokens_computed - before;
    EngineConfig cold_config;
    cold_config.enable_prefix_caching = false;
    Engine cold(*roomy, tokenizer, cold_config);
    tally.check(computed == static_cast<int64_t>(second.size()) - 992,
                "prefix cache" + tag + ": second request computed " + std::to_string(computed) + " tokens");
    tally.check(warm == cold.generate({second}, params)[0].tokens, "prefix cache" + tag + ": equals a cold run");
    tally.check(pool_empty(engine), "prefix cache" + tag + ": pool empty after");
  }
  {  // Preemption in a 24-block pool, by recompute and by swap, against unconstrained runs.
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 8; ++i) prompts.push_back(slice(300 * i, 60 + 10 * i));
    const RequestParams params = greedy(40);
    const auto reference = alone(prompts, params);
    for (PreemptionMode mode : {PreemptionMode::kRecompute, PreemptionMode::kSwap}) {
      const bool swap = mode == PreemptionMode::kSwap;
      TpSetup small_setup = roomy_setup;
      small_setup.kv_blocks = 24;
      small_setup.swap_blocks = swap ? 200 : 0;
      std::string small_placement;
      std::unique_ptr<Executor> small = make_tp(model, 2, small_setup, small_placement);
      const std::string name = (swap ? "preemption by swap" : "preemption by recompute") + tag;
      if (small == nullptr) {
        tally.check(false, name + ": executor not created");
        continue;
      }
      const PreemptionRun run = run_preempting(*small, tokenizer, mode, prompts, params, reference);
      const EngineMetrics& m = run.metrics;
      tally.check(m.num_preemptions > 0 && (!swap || m.kv.num_swapped_out_blocks > 0), name + ": " + run.counts());
      tally.check(run.same == 8, name + ": " + std::to_string(run.same) + "/8 outputs equal unconstrained");
      tally.check(run.pool_empty, name + ": pool empty after");
    }
  }
}

}  // namespace

int run_tensor_parallel(const std::vector<std::string>& args) {
  std::string path = arg_value(args, "--model", "");
  if (path.empty()) {
    // No model given: a random SmolLM2-shaped one in Q4_1 (so `auto` keeps it 4-bit), read
    // with the golden prompts' token ids. Its logits are flat (near-ties everywhere), so the
    // greedy comparison says little there; the logits' error and the engine checks still do.
    path = "/tmp/folio-e2e-tp-smollm2-synth.gguf";
    SynthOptions synth;
    synth.weight_type = DType::Q4_1;
    if (Status s = write_synth_model(synth_config("smollm2-135m").value(), synth, path); !s) {
      std::fprintf(stderr, "tp: %s\n", s.message().c_str());
      return 2;
    }
  }
  const int32_t steps = std::stoi(arg_value(args, "--tokens", "16"));
  const size_t max_cases = static_cast<size_t>(std::stoi(arg_value(args, "--cases", "3")));
  std::vector<int32_t> rank_counts;
  std::stringstream list(arg_value(args, "--ranks", "1,2,3,4"));
  for (std::string item; std::getline(list, item, ',');) rank_counts.push_back(std::stoi(item));
  Expected<LoadedModel> loaded = load_model(path);
  if (!loaded) {
    std::fprintf(stderr, "tp: %s\n", loaded.error().c_str());
    return 2;
  }
  std::ifstream in(std::string(FOLIO_SOURCE_DIR) + "/tests/golden/model/smollm2_q4_1.json");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json goldens = nlohmann::json::parse(text.str());  // named: the loop reads into it
  nlohmann::json cases = nlohmann::json::array();
  for (const nlohmann::json& c : goldens["cases"]) {
    if (cases.size() < max_cases) cases.push_back(c);
  }
  int gpus = 0;
  cudaGetDeviceCount(&gpus);
  std::printf("tp: %d GPU(s); NCCL %s\n", gpus,
              cuda::NcclCollectives::version().empty() ? "not found" : cuda::NcclCollectives::version().c_str());
  Tally tally;
  golden(*loaded, cases, rank_counts, steps, tally);
  engine_checks(*loaded, tally);
  std::printf("tp: %d passed, %d failed\n", tally.passed, tally.failed);
  return tally.failed == 0 ? 0 : 1;
}

// The all-reduce a decode step pays twice a layer, timed alone over NCCL with one rank per GPU:
// microseconds a call at 1 to 512 tokens of the Llama-3-8B hidden size (4,096 floats a token),
// and the bus bandwidth it reaches (2 (N - 1) / N of the bytes over the time, NCCL's measure).
//
//   folio_cuda_e2e tp-bench [--ranks N]   (N GPUs, default all)
int run_tensor_parallel_bench(const std::vector<std::string>& args) {
  int gpus = 0;
  cudaGetDeviceCount(&gpus);
  const int32_t ranks = std::stoi(arg_value(args, "--ranks", std::to_string(gpus)));
  if (ranks < 2 || ranks > gpus) {
    std::printf("tp-bench: needs 2 or more GPUs (this machine has %d)\n", gpus);
    return gpus < 2 ? 0 : 2;
  }
  std::vector<int32_t> devices;
  for (int32_t r = 0; r < ranks; ++r) devices.push_back(r);
  Expected<std::unique_ptr<cuda::NcclCollectives>> nccl = cuda::NcclCollectives::create(devices);
  if (!nccl) {
    std::fprintf(stderr, "tp-bench: %s\n", nccl.error().c_str());
    return 2;
  }
  constexpr int64_t kHidden = 4096;
  constexpr int kIterations = 200;
  std::printf("tp-bench: NCCL %s, %d ranks\n", cuda::NcclCollectives::version().c_str(), ranks);
  for (int64_t tokens : {1, 8, 64, 512}) {
    const size_t n = static_cast<size_t>(tokens * kHidden);
    std::vector<double> seconds(static_cast<size_t>(ranks), 0.0);
    std::vector<std::thread> threads;
    std::atomic<int> ready{0};
    for (int32_t r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] {
        cudaSetDevice(r);
        float* data = nullptr;
        cudaStream_t stream = nullptr;
        cudaMalloc(&data, n * sizeof(float));
        cudaMemset(data, 0, n * sizeof(float));
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        for (int i = 0; i < 10; ++i) (*nccl)->all_reduce_sum(r, data, n, stream);  // warm-up
        cudaStreamSynchronize(stream);
        ready.fetch_add(1);
        while (ready.load() < ranks) std::this_thread::yield();
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < kIterations; ++i) (*nccl)->all_reduce_sum(r, data, n, stream);
        cudaStreamSynchronize(stream);
        seconds[static_cast<size_t>(r)] = seconds_since(start) / kIterations;
        cudaStreamDestroy(stream);
        cudaFree(data);
      });
    }
    for (std::thread& t : threads) t.join();
    const double s = *std::max_element(seconds.begin(), seconds.end());
    const double bytes = static_cast<double>(n * sizeof(float));
    std::printf("RESULT tp_all_reduce ranks=%d tokens=%lld bytes=%.0f us=%.1f bus_gbps=%.1f\n", ranks,
                static_cast<long long>(tokens), bytes, s * 1e6, 2.0 * (ranks - 1) / ranks * bytes / s / 1e9);
  }
  return 0;
}

}  // namespace folio::e2e
