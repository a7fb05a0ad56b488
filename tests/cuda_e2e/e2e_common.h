// Shared pieces of folio_cuda_e2e: a model file opened with its tokenizer, CUDA executors with a
// fixed small KV pool (so several can live beside other GPU work), and a check tally. Plain
// main, no GoogleTest: the GPU machine has none.
#pragma once

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_executor.h"
#include "model/gguf_file.h"
#include "model/model_weights.h"
#include "text/tokenizer.h"

namespace folio::e2e {

struct LoadedModel {
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<ModelWeights> model;  // the weights
  std::unique_ptr<Tokenizer> tokenizer;
};

Expected<LoadedModel> load_model(const std::string& path);

// A CUDA executor whose KV pool is kv_blocks blocks (plus the null block) of 16 tokens.
std::unique_ptr<cuda::CudaExecutor> cuda_executor(const ModelWeights& model, int32_t kv_blocks, int32_t swap_blocks = 0,
                                                  int32_t max_num_seqs = 64, int32_t max_batched_tokens = 512,
                                                  bool graphs = true, const cuda::GemmPolicy& gemm = {});

// The KV format's shape of the pool: the memory of kv_blocks blocks of block_size tokens of
// every layer in `format`, and for a residual format (KIVI) num_staging staging blocks on the
// device and as many for swap. release_window_blocks: a sliding-window model's layers in
// block-table groups (kv/kv_groups.h; its pool then has num_groups times the blocks, each
// holding a group's layers), as the engine runs them; false: one table, as run_greedy builds.
struct PoolFormat {
  KvFormat format = KvFormat::kFp16;
  int32_t block_size = 16;
  int32_t num_staging = 0;
  bool release_window_blocks = false;
  bool staging_overlay = true;  // kv/block_pool.h: block ids over idle staging blocks
};
// weights: kInt4 keeps a GGUF block file's matrices quantized as the file is (--quantization auto).
std::unique_ptr<cuda::CudaExecutor> cuda_executor(const ModelWeights& model, const PoolFormat& pool, int32_t kv_blocks,
                                                  int32_t swap_blocks, int32_t max_num_seqs, int32_t max_batched_tokens,
                                                  bool graphs, const cuda::GemmPolicy& gemm,
                                                  cuda::WeightFormat weights = cuda::WeightFormat::kBf16);

// Counts failures; each check prints one PASS/FAIL line.
struct Tally {
  int passed = 0;
  int failed = 0;
  void check(bool ok, const std::string& what) {
    std::printf("%s  %s\n", ok ? "PASS" : "FAIL", what.c_str());
    std::fflush(stdout);
    (ok ? passed : failed)++;
  }
};

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

constexpr int32_t kBlock = 16;

struct Greedy {
  std::vector<float> last_prompt_logits;
  std::vector<int32_t> tokens;
  std::vector<float> margins;  // top1 - top2 at each generated step
};
// One sequence through an executor (greedy_run.cpp): the prompt in one forward, then `steps`
// greedy tokens chosen on the host. The pool needs (prompt + steps) / 16 + 1 blocks.
Greedy run_greedy(Executor& executor, const std::vector<int32_t>& prompt, int32_t steps);
// The same run with the executor choosing the tokens on its side (a greedy SamplingPlan): only
// token ids and logprobs come back.
std::vector<SampledToken> run_device_greedy(Executor& executor, const std::vector<int32_t>& prompt, int32_t steps);

int run_golden(const std::vector<std::string>& args);
int run_hf(const std::vector<std::string>& args);
int run_engine(const std::vector<std::string>& args);
int run_speculative(const std::vector<std::string>& args);
int run_bench(const std::vector<std::string>& args);
int run_tensor_parallel(const std::vector<std::string>& args);
int run_tensor_parallel_bench(const std::vector<std::string>& args);

// --name value lookup in args; fallback when absent.
std::string arg_value(const std::vector<std::string>& args, const std::string& name, const std::string& fallback);

}  // namespace folio::e2e
