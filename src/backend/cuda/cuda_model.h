// A model on the GPU: its weights uploaded once (cuda_weights.h), activations allocated once for
// at most max_tokens tokens, the GEMM handle; forward() and logits() run the transformer recipe
// through CudaForward (cuda_forward.h). Nothing allocates or synchronizes during either, so a
// decode step can be captured in a CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "backend/cuda/cublaslt_gemm.h"
#include "backend/cuda/cuda_forward.h"
#include "backend/cuda/cuda_weights.h"
#include "backend/cuda/device_buffer.h"
#include "core/status.h"
#include "model/model_weights.h"

namespace folio::cuda {

struct CudaModelLimits {
  int32_t max_tokens = 512;     // tokens of one forward
  int32_t max_seqs = 64;        // sequences of one forward
  int32_t max_logit_rows = 64;  // rows of one logits() call
  int32_t max_context_len = 0;  // longest context attention will see
};

class CudaModel {
 public:
  // tp: this model is one tensor-parallel rank (model is its shard); it must outlive the model.
  static Expected<std::unique_ptr<CudaModel>> create(const ModelWeights& model, const CudaModelLimits& limits,
                                                     int32_t sm_count, WeightFormat format = WeightFormat::kBf16,
                                                     const std::function<void(uint64_t, uint64_t)>& progress = {},
                                                     const DeviceRank* tp = nullptr);

  // The shard's config for a tensor-parallel rank (its heads, FFN width and vocabulary slice).
  const ModelConfig& config() const { return config_; }
  // The width of logits_buffer()'s rows: the whole vocabulary, also on a tensor-parallel rank.
  int32_t logits_vocab() const { return tp_ != nullptr ? tp_->full_config.vocab_size : config_.vocab_size; }
  const CudaModelLimits& limits() const { return limits_; }
  uint64_t weight_bytes() const { return weights_.bytes; }
  WeightFormat weight_format() const { return weights_.layer_format; }
  // "bf16", "fp8", or for kInt4 (auto) how many layer matrices are int4, int8 and bf16, for logs.
  std::string describe_weight_format() const;
  uint64_t activation_bytes() const { return activation_memory_.bytes(); }
  CublasLtGemm& gemm() { return *gemm_; }
  // Pins the batch-invariant algorithm of each weight shape (qkv, o, gate_up, down, lm_head) by
  // timing (CublasLtGemm::tune_pinned) on layer 0's weights and the activation buffers, which
  // it leaves zeroed; on_shape reports each shape as it is done. Call before any forward.
  Status tune_pinned_gemms(cudaStream_t stream, const std::function<void(const PinnedTuning&)>& on_shape);

  // Every layer over the batch; K/V of the new tokens go to kv[layer] at their slots.
  void forward(const DeviceBatch& batch, std::span<const KvLayerView> kv, cudaStream_t stream);
  // Final norm and vocabulary projection of rows [first, first + count) of batch.logit_rows
  // (count <= max_logit_rows) into logits_buffer(): (count, logits_vocab()) fp32, device.
  void logits(const DeviceBatch& batch, int32_t first, int32_t count, cudaStream_t stream);
  float* logits_buffer() const { return activations_.logits; }

 private:
  CudaModel() = default;
  CudaForward bind(const DeviceBatch& batch, std::span<const KvLayerView> kv, cudaStream_t stream) {
    return CudaForward(config_, architecture_, weights_, *gemm_, activations_, sm_count_, batch, kv, stream, tp_);
  }

  ModelConfig config_;
  Architecture architecture_;
  const DeviceRank* tp_ = nullptr;
  CudaModelLimits limits_;
  int32_t sm_count_ = 0;
  DeviceWeights weights_;
  std::unique_ptr<CublasLtGemm> gemm_;
  DeviceBuffer activation_memory_;
  CudaActivations activations_;  // pointers into activation_memory_
};

}  // namespace folio::cuda
