// The GPU as an Executor (`--device cuda`): a CudaModel (cuda_model.h), the paged KV pool in
// device memory (the KvLayerView layout, fp16), a pinned host pool for swapped-out blocks, and
// the step driver: it packs each ForwardBatch into pinned staging, copies it to static device
// buffers, runs the forward (a captured CUDA graph when every sequence decodes one token,
// eagerly otherwise) and either copies the wanted logit rows back or samples them on the GPU
// (sample_tokens) and copies back only the tokens.
//
// Decode graphs are keyed by (batch bucket, block-table width bucket): batch sizes round up to
// 1, 2, 4, 8, 16, 32 and then multiples of 32 up to max_num_seqs (executor/decode_graph_buckets.h)
// and table widths to powers of two; graphs are captured at a bucket's first use. Padding sequences decode token 0 at position 0 against the null block 0
// (zeros, never allocated) and write no K/V (slot -1).
//
// Plain C++ (CUDA's handle types are only declared), so the CLI and the checks include it; the
// definitions live in folio_cuda.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/device_matrix.h"
#include "backend/cuda/device_rank.h"
#include "backend/cuda/gemm_policy.h"
#include "core/status.h"
#include "executor/executor.h"
#include "kv/kv_groups.h"
#include "kv/kv_layer_view.h"
#include "model/model_weights.h"

struct CUstream_st;
struct CUevent_st;
struct CUgraphExec_st;

namespace folio::cuda {

struct CudaExecutorOptions {
  int32_t device = 0;
  // Fraction of the GPU's total memory folio may use: weights, activations, then as many KV
  // blocks as fit in the rest.
  double gpu_memory_utilization = 0.9;
  int64_t kv_cache_bytes = 0;  // > 0: exactly this KV pool instead (tests: a 24-block pool)
  int32_t block_size = 16;
  int64_t swap_space_bytes = 0;          // pinned host pool for preemption by swap
  KvFormat kv_format = KvFormat::kFp16;  // --kv-cache-dtype (kv/kv_format.h)
  // --quantization: the layers' matrices in BF16 (none), FP8 W8A8 (fp8; device_matrix.h;
  // sm_89+), or kInt4 (auto): 4-bit GGUF matrices kept 4-bit, the rest BF16 (cuda_weights.h).
  WeightFormat weight_format = WeightFormat::kBf16;
  // Residual formats (KIVI): fp16 staging blocks for unsealed blocks, taken from the KV budget.
  // 0: enough for max_num_seqs growing blocks plus a full batch of prefill (kv_staging_blocks_for),
  // at most kv_staging_budget's share. The swap pool gets as many host staging blocks.
  int32_t num_staging_blocks = 0;
  // Each layer's K (and V) is [blocks][staging blocks], and the pool may hand out block ids that
  // lie in idle staging blocks' bytes (kv/block_pool.h); false: staging holds nothing else.
  bool staging_overlay = true;
  // Sliding-window layers get their own block tables, whose blocks go back to the pool once out
  // of every query's window (kv/kv_groups.h); false keeps every layer's whole context.
  bool release_window_blocks = true;
  int32_t max_num_batched_tokens = 512;  // activations are sized for this many tokens
  int32_t max_num_seqs = 64;             // decode graphs are captured up to this batch
  int32_t max_model_len = 0;             // 0: the model's trained context
  // Rows of logits one step returns at most (0: one per sequence, max_num_seqs capped at 1,024);
  // `folio perplexity` asks for a whole chunk's.
  int32_t max_logit_rows = 0;
  bool cuda_graphs = true;  // decode-only steps replay captured graphs
  // Fast by default (cuBLASLt's heuristic per shape, GEMV at n <= 8); gemm.batch_invariant
  // (`--batch-invariant`): a row's result does not depend on what else is in the batch, with
  // algorithms tuned at start (gemm_policy.h, cublaslt_gemm.h).
  GemmPolicy gemm;
  bool device_sampling = true;  // rows are sampled on the GPU (Capabilities::samples_on_device)
  bool quiet = false;           // no progress or summary on stderr
  // Tensor parallel (cuda_tensor_parallel_executor.h): the weights are this rank's shard; it
  // must outlive the executor. Decode graphs stay off where its collectives cannot be captured.
  const DeviceRank* tensor_parallel = nullptr;
  // true: create() allocates no KV pool; the caller sizes it with plan_kv() and allocate_kv()
  // (tensor-parallel ranks hold the same number of blocks).
  bool defer_kv = false;
};

// A KV pool's size: device blocks, staging blocks (residual formats) and host swap blocks.
struct CudaKvPlan {
  int32_t blocks = 0;
  int32_t staging = 0;
  int32_t host_blocks = 0;
};

// What the executor did, for logs and benchmarks.
struct CudaExecutorStats {
  int64_t weight_bytes = 0;  // on the device, BF16
  int64_t activation_bytes = 0;
  int64_t kv_pool_bytes = 0;
  int64_t graph_replays = 0;
  int64_t eager_steps = 0;         // = prefill + mixed + eager decode steps
  int64_t prefill_steps = 0;       // eager, every sequence has more than one new token
  int64_t mixed_steps = 0;         // eager, prefill chunks and decode tokens together
  int64_t eager_decode_steps = 0;  // decode-only steps that did not fit a graph
  int64_t device_sampled_steps = 0;
  int32_t graphs_captured = 0;
  int32_t gemm_pinned_fallbacks = 0;  // shapes where the pinned algorithm was refused
  // Time, summed over steps. GPU times come from events around the work on the stream.
  double upload_host_s = 0.0;  // packing the batch on the host and queueing its copy
  double wait_host_s = 0.0;    // blocked in the end-of-step synchronization
  double layers_gpu_s = 0.0;   // forward over the layers (+ lm_head inside a decode graph)
  double head_gpu_s = 0.0;     // the rest: eager lm_head, then GPU sampling or logits D2H
  double capture_s = 0.0;      // capturing decode graphs (host clock, warm-up run included)
  int64_t logits_bytes_to_host = 0;
  std::string device_name;
};

class CudaModel;
struct DeviceBatch;

class CudaExecutor final : public Executor {
 public:
  // Uploads the weights (options.weight_format) and sizes the KV pool. The weights (and their
  // GgufFile) must outlive this call only.
  static Expected<std::unique_ptr<CudaExecutor>> create(const ModelWeights& weights,
                                                        const CudaExecutorOptions& options);
  ~CudaExecutor() override;

  const ModelConfig& config() const override;
  KvPoolLayout kv_pool() const override;
  Capabilities capabilities() const override;
  StepResult execute(const ForwardBatch& batch, const SamplingPlan* plan) override;

  const CudaExecutorStats& stats() const { return stats_; }
  // Zeroes the step counters and times (benchmarks measure one phase at a time).
  void reset_stats();
  // Switches the GEMM policy and drops the captured graphs, which hold the old kernels. A tuned
  // invariant policy without a pinned list reuses the executor's earlier tuning, if any.
  void set_gemm_policy(const GemmPolicy& policy);
  // The policy in use; with tuned pinning, .pinned holds the tuned algorithms, so that another
  // executor given this policy computes the same bits.
  const GemmPolicy& gemm_policy() const { return options_.gemm; }
  // The pinned GEMM algorithms, one line per weight shape (empty before the first forward).
  std::string gemm_description() const;
  // What the layers' weights are on the device ("bf16", "fp8", or how many matrices are int4,
  // int8 and bf16), as the startup line says.
  std::string weight_format_description() const;
  // Copies one layer's K (or V) block to the host, for checks: (block_size, kv_heads, head_dim);
  // with block-table groups the block is one of that layer's group.
  std::vector<uint8_t> read_block(int32_t layer, bool values, int32_t block);

  // The pool the options buy with memory_share of what the utilization budget leaves on this
  // GPU now (ranks sharing a GPU split it), or with kv_cache_bytes / swap_space_bytes if given.
  Expected<CudaKvPlan> plan_kv(double memory_share) const;
  // Allocates the pool (once; create() does it unless options.defer_kv).
  Status allocate_kv(const CudaKvPlan& plan);
  // One KV block of this executor's layers (its KV heads), all slots, K and V.
  int64_t kv_bytes_per_block() const;

 private:
  // Where a step's rows are sampled: logits copied to the host (params null), or on the GPU
  // with these device-side params (one per row, or one set shared by every row: the greedy
  // params, max_logit_rows of them) and num_penalties penalty entries.
  struct RowSampler {
    const RowSampling* params = nullptr;
    int32_t num_penalties = 0;
    bool per_row = false;
  };

  CudaExecutor() = default;
  Status allocate_step_buffers();
  void print_summary() const;
  // Batch-invariant policy with tune_pinned: pins each weight shape's algorithm by timing
  // (CudaModel::tune_pinned_gemms), shapes already in options_.gemm.pinned excepted, and
  // records the result there and in tuned_. A tuning that fails is a warning (the rest pin the
  // heuristic's pick), not an error.
  Status tune_gemms();
  void copy_blocks(std::span<const BlockCopy> copies);
  // Packs the batch (padded to padded_seqs decode sequences) into staging and copies it to the
  // device; returns the device view.
  DeviceBatch upload(const ForwardBatch& batch, int32_t padded_seqs, int32_t table_width);
  CUgraphExec_st* decode_graph(int32_t seqs, int32_t table_width, const DeviceBatch& batch);
  void drop_graphs();
  // The step: uploads, runs the layers and the vocabulary projection, per chunk of logit rows
  // copies them to logits_host_ or samples them into sampled_, and synchronizes. Returns the
  // number of logit rows.
  int32_t run(const ForwardBatch& batch, const RowSampler& sampler);
  void finish_rows(int32_t first, int32_t count, const RowSampler& sampler);
  // The plan's rows and penalty entries to the device (a plain greedy plan uses the greedy
  // params uploaded at start).
  RowSampler upload_sampling(const SamplingPlan& plan, int32_t rows);
  std::span<const SampledToken> read_samples(int32_t rows);

  CudaExecutorOptions options_;
  std::unique_ptr<CudaModel> model_;
  size_t total_memory_ = 0;  // the GPU's
  CUstream_st* stream_ = nullptr;
  int32_t sm_count_ = 0;
  bool programmatic_launch_ = false;  // sm_90+ and not FOLIO_PROGRAMMATIC_LAUNCH=0 (GemmPolicy)
  int32_t max_model_len_ = 0;
  int32_t max_blocks_per_seq_ = 0;  // ceil(max_model_len / block_size)
  int32_t max_graph_seqs_ = 0;
  // FOLIO_PROFILE_DECODE_STEP=N: the Nth decode-only step alone runs between cudaProfilerStart
  // and Stop (`ncu --profile-from-start off`: bench/decode_profile.py --batch), so a profile of
  // one step at batch 512 does not pay the profiler's cost on every prefill kernel before it.
  int32_t profile_decode_step_ = 0;
  int32_t decode_steps_run_ = 0;

  // KV pool: a block holds groups_.num_slots layer slots (every layer with one group); slot s's
  // K at pool + 2s * layer_bytes, its V at pool + (2s + 1) * layer_bytes, each num_blocks
  // blocks in the format's layout (kv_format.h). Layer l lives in slot groups_.layer_slot[l] of
  // the blocks of its group's tables.
  KvGroups groups_;
  DeviceBuffer kv_pool_;
  size_t block_bytes_ = 0;  // one slot's K (or V) of one block
  size_t layer_bytes_ = 0;
  int32_t num_blocks_ = 0;
  std::vector<KvLayerView> kv_layers_;  // (num_layers,) each layer's slot
  // Host swap pool, HostKvPool's layout: (num_host_blocks, num_slots, 2, block) contiguous.
  PinnedBuffer host_pool_;
  int32_t num_host_blocks_ = 0;
  // Residual formats: staging blocks (fp16, an fp16 block's layout) follow each layer half's
  // blocks in kv_pool_, at staging_offset_ from its start; host staging for swapped sequences as
  // (num_host_staging, num_layers, 2, staging block).
  size_t staging_block_bytes_ = 0;
  size_t staging_offset_ = 0;
  int32_t num_overlay_blocks_ = 0;
  int32_t num_staging_ = 0;
  PinnedBuffer host_staging_;
  int32_t num_host_staging_ = 0;
  int32_t max_seals_ = 0;     // seals one step can carry (the step inputs' seal list)
  size_t tables_offset_ = 0;  // int32s before the block tables in the step inputs

  // Static inputs (graphs read these addresses) and their pinned staging.
  DeviceBuffer inputs_;
  PinnedBuffer staging_;
  size_t inputs_bytes_ = 0;
  int32_t* d_tokens_ = nullptr;
  int32_t* d_positions_ = nullptr;
  int32_t* d_slots_ = nullptr;  // (num_groups, max_tokens): each group's slots
  int32_t* d_cu_query_starts_ = nullptr;
  int32_t* d_context_lens_ = nullptr;
  int32_t* d_logit_rows_ = nullptr;
  int32_t* d_num_seals_ = nullptr;  // (1,) then (max_seals_, 2) (block, staging) pairs
  int32_t* d_seals_ = nullptr;
  int32_t* d_block_tables_ = nullptr;  // (num_groups, seqs, width) for a step's seqs and width
  PinnedBuffer logits_host_;           // (max rows, vocab) fp32
  size_t logits_host_rows_ = 0;
  // GPU sampling: greedy params for every row, uploaded once (plain greedy plans use them);
  // general plans upload their rows to sample_params_ and the penalty lists
  // [tokens | counts | scratch] to penalties_, grown on demand.
  DeviceBuffer greedy_params_;  // (max_logit_rows,) RowSampling
  DeviceBuffer sample_params_;  // (max rows,) RowSampling
  DeviceBuffer penalties_;      // 3 * penalty_capacity_ int32/fp32
  size_t penalty_capacity_ = 0;
  std::vector<int32_t> penalties_host_;
  DeviceBuffer sampled_;                   // (max rows,) int32 tokens, then (max rows,) fp32 logprobs
  PinnedBuffer sampled_host_;              // the same, on the host
  std::vector<SampledToken> sampled_out_;  // (rows of the last sampled step)
  CUevent_st* step_start_ = nullptr;
  CUevent_st* layers_done_ = nullptr;
  CUevent_st* step_done_ = nullptr;

  std::map<std::pair<int32_t, int32_t>, CUgraphExec_st*> graphs_;
  // The last tuning's choices: switching away from the invariant policy and back reuses them
  // (a second tuning would cost time and, on near-ties, could choose differently).
  std::vector<PinnedGemmAlgo> tuned_;
  CudaExecutorStats stats_;
};

}  // namespace folio::cuda
