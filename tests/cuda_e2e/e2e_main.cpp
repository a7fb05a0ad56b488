// folio_cuda_e2e: the CUDA model and the engine on it, checked against the CPU path, and the
// GPU benchmarks. Run by scripts/gpu-check on the GPU machine.
//
//   folio_cuda_e2e golden --model SmolLM2.gguf   CUDA vs CPU on the golden prompts
//   folio_cuda_e2e golden --model M --prompt-lengths 9,700   ... on random prompts (synth models)
//   folio_cuda_e2e engine [--model FILE]        batch invariance, prefix cache, preemption
//   folio_cuda_e2e speculative [--model FILE]   greedy with speculation equals it off (pinned)
//   folio_cuda_e2e bench --model llama3-8b.gguf  decode tok/s vs bandwidth, offline throughput
//   folio_cuda_e2e hf --dir HF_DIR_ROOT          Hugging Face directories vs transformers' goldens
//   folio_cuda_e2e tp --model SmolLM2.gguf       tensor parallel (TP = 1..4) against one executor
//   folio_cuda_e2e tp-bench                      the NCCL all-reduce alone, 2+ GPUs
#include <cstdio>
#include <string>
#include <vector>

#include "e2e_common.h"
#include "executor/kv_pool_sizing.h"
#include "model/gguf_tokenizer.h"

namespace folio::e2e {

std::string arg_value(const std::vector<std::string>& args, const std::string& name, const std::string& fallback) {
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == name) return args[i + 1];
  }
  return fallback;
}

Expected<LoadedModel> load_model(const std::string& path) {
  LoadedModel loaded;
  Expected<GgufFile> file = GgufFile::open(path);
  if (!file) return file.status();
  loaded.file = std::make_unique<GgufFile>(std::move(file).value());
  Expected<std::unique_ptr<ModelWeights>> model = ModelWeights::load(*loaded.file);
  if (!model) return model.status();
  loaded.model = std::move(model).value();
  Expected<Tokenizer> tokenizer = tokenizer_from_gguf(*loaded.file);
  if (!tokenizer) return tokenizer.status();
  loaded.tokenizer = std::make_unique<Tokenizer>(std::move(tokenizer).value());
  return Expected<LoadedModel>(std::move(loaded));
}

std::unique_ptr<cuda::CudaExecutor> cuda_executor(const ModelWeights& model, int32_t kv_blocks, int32_t swap_blocks,
                                                  int32_t max_num_seqs, int32_t max_batched_tokens, bool graphs,
                                                  const cuda::GemmPolicy& gemm) {
  return cuda_executor(model, PoolFormat{}, kv_blocks, swap_blocks, max_num_seqs, max_batched_tokens, graphs, gemm);
}

std::unique_ptr<cuda::CudaExecutor> cuda_executor(const ModelWeights& model, const PoolFormat& pool, int32_t kv_blocks,
                                                  int32_t swap_blocks, int32_t max_num_seqs, int32_t max_batched_tokens,
                                                  bool graphs, const cuda::GemmPolicy& gemm,
                                                  cuda::WeightFormat weights) {
  // kv_blocks blocks of every layer's K/V, whatever the grouping (the same memory either way).
  const int64_t block_bytes = kv_bytes_per_block(model.config(), pool.block_size, pool.format, false);
  const int64_t staging_bytes =
      static_cast<int64_t>(pool.num_staging) *
      static_cast<int64_t>(
          kv_cache_shape(model.config(), 1, pool.block_size, pool.format, 0, false).bytes_per_staging_block());
  cuda::CudaExecutorOptions options;
  options.kv_cache_bytes = kv_blocks * block_bytes + staging_bytes;
  options.swap_space_bytes = swap_blocks > 0 ? swap_blocks * block_bytes + staging_bytes : 0;
  options.block_size = pool.block_size;
  options.kv_format = pool.format;
  options.num_staging_blocks = pool.num_staging;
  options.release_window_blocks = pool.release_window_blocks;
  options.staging_overlay = pool.staging_overlay;
  options.max_num_seqs = max_num_seqs;
  options.max_num_batched_tokens = max_batched_tokens;
  options.cuda_graphs = graphs;
  options.gemm = gemm;
  options.weight_format = weights;
  options.quiet = true;
  Expected<std::unique_ptr<cuda::CudaExecutor>> executor = cuda::CudaExecutor::create(model, options);
  if (!executor) {
    std::fprintf(stderr, "folio_cuda_e2e: %s\n", executor.error().c_str());
    std::exit(2);
  }
  return std::move(executor).value();
}

}  // namespace folio::e2e

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const std::string mode = args.empty() ? "" : args[0];
  if (mode == "golden") return folio::e2e::run_golden(args);
  if (mode == "engine") return folio::e2e::run_engine(args);
  if (mode == "speculative") return folio::e2e::run_speculative(args);
  if (mode == "bench") return folio::e2e::run_bench(args);
  if (mode == "hf") return folio::e2e::run_hf(args);
  if (mode == "tp") return folio::e2e::run_tensor_parallel(args);
  if (mode == "tp-bench") return folio::e2e::run_tensor_parallel_bench(args);
  std::fprintf(stderr, "usage: folio_cuda_e2e golden|engine|speculative|bench|hf|tp|tp-bench [--model FILE] ...\n");
  return 2;
}
