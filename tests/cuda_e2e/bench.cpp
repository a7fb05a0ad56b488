// GPU benchmarks on a (synth) model: single-stream decode against the bandwidth bound, and
// offline throughput (256 requests x 512 prompt / 128 output tokens) through the engine.
//   bound tok/s = measured copy bandwidth / (weight bytes + KV bytes read per token)
#include <cuda_runtime.h>

#include <random>

#include "e2e_common.h"
#include "engine/engine.h"

namespace folio::e2e {
namespace {

// Device-to-device copy bandwidth, counting bytes read and written (as memory sees them).
double copy_bandwidth_gbs() {
  const size_t bytes = size_t{2} << 30;
  void* a = nullptr;
  void* b = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) return 0.0;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
  cudaEventRecord(start);
  const int reps = 10;
  for (int i = 0; i < reps; ++i) cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaFree(a);
  cudaFree(b);
  return 2.0 * bytes * reps / (ms / 1e3) / 1e9;
}

std::vector<int32_t> random_prompt(std::mt19937& rng, int32_t length, int32_t vocab) {
  std::uniform_int_distribution<int32_t> pick(1000, std::min(vocab, 100000) - 1);
  std::vector<int32_t> prompt(static_cast<size_t>(length));
  for (int32_t& t : prompt) t = pick(rng);
  return prompt;
}

}  // namespace

int run_bench(const std::vector<std::string>& args) {
  const std::string path = arg_value(args, "--model", "");
  const int32_t requests = std::stoi(arg_value(args, "--requests", "256"));
  const int32_t prompt_len = std::stoi(arg_value(args, "--prompt", "512"));
  const int32_t output_len = std::stoi(arg_value(args, "--output", "128"));
  auto start = std::chrono::steady_clock::now();
  Expected<LoadedModel> loaded = load_model(path);
  if (!loaded) {
    std::fprintf(stderr, "bench: %s\n", loaded.error().c_str());
    return 2;
  }
  std::printf("bench: mapped %s in %.1f s\n", path.c_str(), seconds_since(start));
  const double bandwidth = copy_bandwidth_gbs();
  std::printf("bench: device copy bandwidth %.0f GB/s (read + write)\n", bandwidth);

  start = std::chrono::steady_clock::now();
  cuda::CudaExecutorOptions options;
  options.gpu_memory_utilization = 0.9;
  options.max_num_seqs = 256;
  options.max_num_batched_tokens = 8192;
  options.max_model_len = 4096;
  Expected<std::unique_ptr<ModelExecutor>> made = cuda::make_cuda_executor(*loaded->model, options);
  if (!made) {
    std::fprintf(stderr, "bench: %s\n", made.error().c_str());
    return 2;
  }
  ModelExecutor& executor = **made;
  std::printf("bench: executor ready in %.1f s (%d KV blocks)\n", seconds_since(start), executor.num_kv_blocks());
  const ModelConfig& c = executor.config();
  const cuda::CudaExecutorStats stats = cuda::cuda_executor_stats(executor);
  const double kv_bytes_per_token = 2.0 * c.num_layers * c.kv_dim() * 2;

  EngineConfig config;
  config.max_model_len = 4096;
  config.scheduler.max_num_seqs = 256;
  config.scheduler.max_num_batched_tokens = 8192;
  std::mt19937 rng(7);
  {  // Single stream: 128-token prompt, then decode; the first step (prefill) is not timed.
    Engine engine(executor, *loaded->tokenizer, config);
    RequestParams params;
    params.sampling.temperature = 0.0f;
    params.ignore_eos = true;
    params.max_tokens = 256;
    const std::vector<int32_t> prompt = random_prompt(rng, 128, c.vocab_size);
    engine.generate({prompt}, RequestParams{params});  // warm-up: captures the batch-1 graphs
    const std::vector<Generation> out = engine.generate({prompt}, params);
    const double tpot = out[0].time_per_output_token_s;
    const double mean_context = 128 + 256 / 2.0;
    const double bytes_per_token = static_cast<double>(stats.weight_bytes) + kv_bytes_per_token * mean_context;
    const double bound = bandwidth * 1e9 / bytes_per_token;
    std::printf("RESULT decode_single_stream tok_per_s=%.1f bound_tok_per_s=%.1f share=%.1f%% "
                "(weights %.2f GB + KV %.1f MB per token at mean context %.0f)\n",
                1.0 / tpot, bound, 100.0 / tpot / bound, stats.weight_bytes / 1e9,
                kv_bytes_per_token * mean_context / 1e6, mean_context);
  }
  {  // Offline throughput.
    Engine engine(executor, *loaded->tokenizer, config);
    RequestParams params;
    params.sampling.temperature = 0.0f;
    params.ignore_eos = true;
    params.max_tokens = output_len;
    std::vector<std::vector<int32_t>> prompts;
    for (int32_t i = 0; i < requests; ++i) prompts.push_back(random_prompt(rng, prompt_len, c.vocab_size));
    engine.generate({prompts[0]}, params);  // warm-up
    start = std::chrono::steady_clock::now();
    const std::vector<Generation> out = engine.generate(prompts, params);
    const double seconds = seconds_since(start);
    int64_t generated = 0;
    for (const Generation& g : out) generated += static_cast<int64_t>(g.tokens.size());
    std::printf("RESULT offline_throughput requests=%d prompt=%d output=%d seconds=%.2f output_tok_per_s=%.1f "
                "total_tok_per_s=%.1f\n",
                requests, prompt_len, output_len, seconds, generated / seconds,
                (generated + static_cast<double>(requests) * prompt_len) / seconds);
  }
  const cuda::CudaExecutorStats after = cuda::cuda_executor_stats(executor);
  std::printf("bench: graphs captured %d, replays %lld, eager steps %lld\n", after.graphs_captured,
              static_cast<long long>(after.graph_replays), static_cast<long long>(after.eager_steps));
  return 0;
}

}  // namespace folio::e2e
