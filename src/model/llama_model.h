// The Llama-family transformer (Llama 2/3, SmolLM2, Mistral, Qwen2) as a forward pass over
// Backend ops. Weights are views into the memory-mapped GGUF file, used in their stored format.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "kv/kv_cache_storage.h"
#include "model/forward_batch.h"
#include "model/gguf_file.h"
#include "model/model_config.h"

namespace folio {

struct LayerWeights {
  std::vector<float> attn_norm;  // (hidden,)
  WeightTensor q, k, v, o;       // (q_dim, hidden), (kv_dim, hidden) x2, (hidden, q_dim)
  std::vector<float> q_bias, k_bias, v_bias;  // empty unless the model has QKV bias (Qwen2)
  std::vector<float> ffn_norm;   // (hidden,)
  WeightTensor gate, up, down;   // (ffn, hidden) x2, (hidden, ffn)
};

// Called while loading with (bytes done, bytes total).
using LoadProgress = std::function<void(uint64_t, uint64_t)>;

class LlamaModel {
 public:
  // The GgufFile must outlive the model: weights point into its mapping.
  static Expected<std::unique_ptr<LlamaModel>> load(const GgufFile& file,
                                                    const LoadProgress& progress = {});

  const ModelConfig& config() const { return config_; }
  uint64_t weight_bytes() const { return weight_bytes_; }
  KvCacheShape kv_shape(int32_t num_blocks, int32_t block_size) const;

  // The weights as loaded, for backends that keep their own copy (the CUDA model uploads them).
  const WeightTensor& token_embedding() const { return token_embedding_; }
  const WeightTensor& output() const { return output_; }
  const std::vector<float>& output_norm() const { return output_norm_; }
  const std::vector<float>& rope_freq_factors() const { return rope_freq_factors_; }
  const std::vector<LayerWeights>& layers() const { return layers_; }

  // Runs the batch through every layer, writing its K/V into `cache`, and fills
  // logits: (batch.logit_rows.size(), vocab_size).
  void forward(Backend& backend, const ForwardBatch& batch, KvCacheStorage& cache,
               float* logits);

 private:
  LlamaModel() = default;
  void attention_block(Backend& backend, const ForwardBatch& batch, KvCacheStorage& cache,
                       int32_t layer_index);
  void mlp_block(Backend& backend, int32_t n, const LayerWeights& layer);

  ModelConfig config_;
  WeightTensor token_embedding_;  // (vocab, hidden)
  WeightTensor output_;           // (vocab, hidden); the embedding when tied
  std::vector<float> output_norm_;
  std::vector<float> rope_freq_factors_;  // Llama-3 scaling, empty if none
  std::vector<LayerWeights> layers_;
  uint64_t weight_bytes_ = 0;

  // Activations, reused across calls (the engine is single-threaded).
  std::vector<float> x_;       // (n, hidden) residual stream
  std::vector<float> normed_;  // (n, hidden)
  std::vector<float> q_;       // (n, q_dim)
  std::vector<float> k_;       // (n, kv_dim)
  std::vector<float> v_;       // (n, kv_dim)
  std::vector<float> attn_;    // (n, q_dim)
  std::vector<float> proj_;    // (n, hidden)
  std::vector<float> gate_;    // (n, ffn)
  std::vector<float> up_;      // (n, ffn)
};

}  // namespace folio
