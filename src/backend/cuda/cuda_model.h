// The Llama-family forward pass on the GPU: weights uploaded once (cuda_weights.h), activations
// allocated once for at most max_tokens tokens, each layer as
//   rms_norm -> QKV GEMM -> rope + bias + paged K/V write -> paged attention -> O GEMM (+= x)
//   rms_norm -> gate|up GEMM -> SwiGLU -> down GEMM (+= x)
// with the kernels of backend/cuda/kernels and cuBLASLt GEMMs (BF16 in, FP32 out; the O and down
// GEMMs accumulate straight into the FP32 residual stream). Nothing allocates or synchronizes
// during forward(), so a decode step can be captured in a CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "backend/attention_batch.h"
#include "backend/cuda/cublaslt_gemm.h"
#include "backend/cuda/cuda_weights.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/kernels/kernels.h"
#include "core/status.h"
#include "model/llama_model.h"

namespace folio::cuda {

// One forward's inputs, all device pointers (static buffers when the step is a graph replay).
struct DeviceBatch {
  const int32_t* tokens = nullptr;           // (num_tokens,)
  const int32_t* positions = nullptr;        // (num_tokens,)
  const int32_t* slot_mapping = nullptr;     // (num_tokens,) -1: no K/V write (padding)
  const int32_t* cu_query_starts = nullptr;  // (num_seqs + 1,)
  const int32_t* context_lens = nullptr;     // (num_seqs,)
  const int32_t* block_tables = nullptr;     // (num_seqs, max_blocks_per_seq)
  const int32_t* logit_rows = nullptr;       // (num_logit_rows,) token indices
  int32_t num_tokens = 0;
  int32_t num_seqs = 0;
  int32_t max_blocks_per_seq = 0;
  int32_t max_query_len = 0;
  int32_t max_context_len = 0;
  int32_t num_logit_rows = 0;
};

struct CudaModelLimits {
  int32_t max_tokens = 512;      // tokens of one forward
  int32_t max_seqs = 64;         // sequences of one forward
  int32_t max_logit_rows = 64;   // rows of one logits() call
  int32_t max_context_len = 0;   // longest context attention will see
};

class CudaModel {
 public:
  static Expected<std::unique_ptr<CudaModel>> create(
      const LlamaModel& model, const CudaModelLimits& limits, int32_t sm_count,
      const std::function<void(uint64_t, uint64_t)>& progress = {});

  const ModelConfig& config() const { return config_; }
  const CudaModelLimits& limits() const { return limits_; }
  uint64_t weight_bytes() const { return weights_.bytes; }
  uint64_t activation_bytes() const { return activations_.bytes(); }
  CublasLtGemm& gemm() { return *gemm_; }
  // Pins the batch-invariant algorithm of each weight shape (qkv, o, gate_up, down, lm_head) by
  // timing (CublasLtGemm::tune_pinned) on layer 0's weights and the activation buffers, which
  // it leaves zeroed; on_shape reports each shape as it is done. Call before any forward.
  Status tune_pinned_gemms(cudaStream_t stream, const std::function<void(const PinnedTuning&)>& on_shape);

  // Every layer over the batch; K/V of the new tokens go to kv[layer] at their slots.
  void forward(const DeviceBatch& batch, std::span<const KvLayerView> kv, cudaStream_t stream);
  // Final norm and vocabulary projection of rows [first, first + count) of batch.logit_rows
  // (count <= max_logit_rows) into logits(): (count, vocab) fp32, device.
  void logits(const DeviceBatch& batch, int32_t first, int32_t count, cudaStream_t stream);
  const float* logits_buffer() const { return logits_; }
  float* logits_buffer() { return logits_; }

 private:
  CudaModel() = default;

  ModelConfig config_;
  CudaModelLimits limits_;
  int32_t sm_count_ = 0;
  DeviceRope rope_;
  DeviceWeights weights_;
  std::unique_ptr<CublasLtGemm> gemm_;
  DeviceBuffer activations_;
  float* x_ = nullptr;            // (max_tokens, hidden) fp32 residual stream
  uint16_t* normed_ = nullptr;    // (max_tokens, hidden) bf16
  float* qkv_ = nullptr;          // (max_tokens, q_dim + 2 kv_dim) fp32
  uint16_t* q_ = nullptr;         // (max_tokens, q_dim) fp16, roped
  uint16_t* attn_ = nullptr;      // (max_tokens, q_dim) bf16
  float* gate_up_ = nullptr;      // (max_tokens, 2 ffn) fp32
  uint16_t* act_ = nullptr;       // (max_tokens, ffn) bf16
  float* final_x_ = nullptr;      // (max_logit_rows, hidden) fp32, gathered rows
  uint16_t* final_normed_ = nullptr;  // (max_logit_rows, hidden) bf16
  float* logits_ = nullptr;       // (max_logit_rows, vocab) fp32
  Workspace attention_workspace_;
};

}  // namespace folio::cuda
