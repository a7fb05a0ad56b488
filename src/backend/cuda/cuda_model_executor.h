// The CUDA ModelExecutor: a CudaModel, the paged KV pool in device memory (the KvLayerView
// layout, fp16), a pinned host pool for swapped-out blocks, and the step driver: it packs
// each ForwardBatch into pinned staging, copies it to static device buffers, runs the forward
// (a captured CUDA graph when every sequence decodes one token, eagerly otherwise) and copies
// only the wanted logit rows back.
//
// Decode graphs are keyed by (batch bucket, block-table width bucket): batch sizes round up to
// 1, 2, 4, ..., max_num_seqs and table widths to powers of two, so a handful of graphs cover
// every decode step. Padding sequences decode token 0 at position 0 against the null block 0
// (zeros, never allocated) and write no K/V (slot -1).
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <string>
#include <memory>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_executor.h"
#include "backend/cuda/cuda_model.h"
#include "backend/cuda/device_buffer.h"

namespace folio::cuda {

class CudaModelExecutor final : public ModelExecutor {
 public:
  static Expected<std::unique_ptr<CudaModelExecutor>> create(const LlamaModel& model,
                                                             const CudaExecutorOptions& options);
  ~CudaModelExecutor() override;

  const ModelConfig& config() const override { return model_->config(); }
  int32_t block_size() const override { return options_.block_size; }
  int32_t num_kv_blocks() const override { return num_blocks_; }
  int32_t num_host_blocks() const override { return num_host_blocks_; }
  void copy_blocks(std::span<const BlockCopy> copies) override;
  std::span<const float> forward(const ForwardBatch& batch) override;
  bool can_sample_greedy() const override { return options_.device_sampling; }
  std::span<const GreedySample> forward_greedy(const ForwardBatch& batch) override;
  // Every SamplingParams the sample_tokens kernel implements (all of them; top logprobs and
  // beams are the engine's to route to the host).
  bool can_sample(const SamplingParams& params) const override {
    (void)params;
    return options_.device_sampling;
  }
  std::span<const GreedySample> forward_sample(const ForwardBatch& batch, const SampleBatch& sampling) override;

  const CudaExecutorStats& stats() const { return stats_; }
  void reset_stats();
  void set_gemm_policy(const GemmPolicy& policy);
  // The policy in use; with tuned pinning, .pinned holds the tuned algorithms.
  const GemmPolicy& gemm_policy() const { return options_.gemm; }
  std::string gemm_description() { return model_->gemm().describe_pinned(); }
  // Copies one layer's K (or V) block to the host, for checks: (block_size, kv_heads, head_dim).
  std::vector<uint16_t> read_block(int32_t layer, bool values, int32_t block);

 private:
  CudaModelExecutor() = default;
  Status allocate_kv(const CudaExecutorOptions& options, size_t total_memory);
  // Batch-invariant policy with tune_pinned: pins each weight shape's algorithm by timing
  // (CudaModel::tune_pinned_gemms), shapes already in options_.gemm.pinned excepted, and
  // records the result there and in tuned_. Progress and the chosen times go to stderr; a
  // tuning that fails is a warning (the rest pin the heuristic's pick), not an error.
  Status tune_gemms();
  // Packs the batch (padded to the graph's shape when decode_bucket > 0) into staging and
  // copies it to the device; returns the device view.
  DeviceBatch upload(const ForwardBatch& batch, int32_t padded_seqs, int32_t table_width);
  cudaGraphExec_t decode_graph(int32_t seqs, int32_t table_width, const DeviceBatch& batch);
  void drop_graphs();
  // The step without its ending: uploads, runs the layers and the vocabulary projection, and
  // per chunk of logit rows either copies them to logits_host_ or (greedy) samples them into
  // sampled_. Returns the number of logit rows; the caller synchronizes.
  int32_t run(const ForwardBatch& batch, bool greedy);
  void finish_rows(int32_t first, int32_t count, bool greedy);
  // Copies a SampleBatch's rows and penalty entries to the device (forward_sample) and points
  // finish_rows at them; greedy runs otherwise use greedy_params_.
  void upload_sampling(const SampleBatch& sampling, int32_t rows);
  std::span<const GreedySample> read_samples(int32_t rows);

  CudaExecutorOptions options_;
  std::unique_ptr<CudaModel> model_;
  cudaStream_t stream_ = nullptr;
  int32_t sm_count_ = 0;
  int32_t max_blocks_per_seq_ = 0;   // ceil(max_model_len / block_size)
  int32_t max_graph_seqs_ = 0;

  // KV pool: layer l's K at pool + 2l * layer_bytes, its V at pool + (2l + 1) * layer_bytes,
  // each (num_blocks, block_size, num_kv_heads, head_dim) fp16.
  DeviceBuffer kv_pool_;
  size_t block_bytes_ = 0;  // one layer's K (or V) of one block
  size_t layer_bytes_ = 0;
  int32_t num_blocks_ = 0;
  std::vector<KvLayerView> kv_layers_;
  // Host swap pool, HostKvPool's layout: (num_host_blocks, num_layers, 2, block) contiguous.
  PinnedBuffer host_pool_;
  int32_t num_host_blocks_ = 0;

  // Static inputs (graphs read these addresses) and their pinned staging.
  DeviceBuffer inputs_;
  PinnedBuffer staging_;
  size_t inputs_bytes_ = 0;
  int32_t* d_tokens_ = nullptr;
  int32_t* d_positions_ = nullptr;
  int32_t* d_slots_ = nullptr;
  int32_t* d_cu_query_starts_ = nullptr;
  int32_t* d_context_lens_ = nullptr;
  int32_t* d_logit_rows_ = nullptr;
  int32_t* d_block_tables_ = nullptr;
  PinnedBuffer logits_host_;  // (max rows, vocab) fp32
  size_t logits_host_rows_ = 0;
  // GPU greedy sampling: every row's params are greedy ones (no penalties), uploaded once.
  DeviceBuffer greedy_params_;     // (max_logit_rows,) SampleRowParams
  DeviceBuffer sampled_;           // (max rows,) int32 tokens, then (max rows,) fp32 logprobs
  PinnedBuffer sampled_host_;      // the same, on the host
  std::vector<GreedySample> greedy_out_;  // (rows of the last forward_greedy)
  // General GPU sampling (forward_sample): per-row params, and the penalty lists
  // [tokens | counts | scratch] grown on demand; null pointers while greedy_params_ serve.
  DeviceBuffer sample_params_;     // (max rows,) SampleRowParams
  DeviceBuffer penalties_;         // 3 * penalty_capacity_ int32/fp32
  size_t penalty_capacity_ = 0;
  std::vector<SampleRowParams> sample_params_host_;
  std::vector<int32_t> penalties_host_;
  const SampleRowParams* active_params_ = nullptr;
  int32_t active_penalties_ = 0;
  cudaEvent_t step_start_ = nullptr, layers_done_ = nullptr, step_done_ = nullptr;

  std::map<std::pair<int32_t, int32_t>, cudaGraphExec_t> graphs_;
  // The last tuning's choices: switching away from the invariant policy and back reuses them
  // (a second tuning would cost time and, on near-ties, could choose differently).
  std::vector<PinnedGemmAlgo> tuned_;
  CudaExecutorStats stats_;
};

}  // namespace folio::cuda
