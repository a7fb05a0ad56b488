// A model's hyper-parameters, its architecture description and its weights as loaded: views into
// the memory-mapped GGUF file or safetensors shards, in their stored formats (block-quantized
// types stay as they are).
// No forward pass and no KV cache live here: executors run the architecture
// (model/transformer_recipe.h) over these weights on their device.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/status.h"
#include "model/architecture.h"
#include "model/gguf_file.h"
#include "model/model_config.h"
#include "model/tensor_parallel_plan.h"
#include "model/weight_tensor.h"

namespace folio {

struct LayerWeights {
  std::vector<float> attn_norm;               // (hidden,)
  WeightTensor q, k, v, o;                    // (q_dim, hidden), (kv_dim, hidden) x2, (hidden, q_dim)
  std::vector<float> q_bias, k_bias, v_bias;  // empty unless the model has QKV bias (Qwen2)
  std::vector<float> ffn_norm;                // (hidden,)
  WeightTensor gate, up, down;                // (ffn, hidden) x2, (hidden, ffn)
  // Gemma 3 (Architecture::qk_norm, post_norms); empty otherwise.
  std::vector<float> q_norm, k_norm;                 // (head_dim,): every head's
  std::vector<float> post_attn_norm, post_ffn_norm;  // (hidden,)

  bool has_qkv_bias() const { return !q_bias.empty() || !k_bias.empty() || !v_bias.empty(); }
};

// Called while loading with (bytes done, bytes total).
using LoadProgress = std::function<void(uint64_t, uint64_t)>;

class HfCheckpoint;
struct HfModelConfig;

struct HfLoadOptions {
  // true: Q / K rows are put in computing order in memory the weights own, and every weight
  // page is faulted in with progress. false (a device that uploads the weights): every tensor
  // stays a view of the mapping as stored (WeightTensor::interleave_heads says how to reorder
  // it) and nothing is read here, so a checkpoint larger than host memory streams to the device.
  bool for_cpu = true;
};

class ModelWeights {
 public:
  // The GgufFile must outlive the weights: they point into its mapping.
  static Expected<std::unique_ptr<ModelWeights>> load(const GgufFile& file, const LoadProgress& progress = {});
  // A Hugging Face directory's weights (hf_weights.cpp): F32 / F16 / BF16 tensors used in
  // place, shapes checked against config.json. Q and K rows of Llama-layout models are taken
  // in the order llama.cpp's converter writes them, so that both formats compute the same thing
  // in the same order (see HfLoadOptions). The checkpoint must outlive the weights.
  static Expected<std::unique_ptr<ModelWeights>> load_hf(const HfCheckpoint& checkpoint, const HfModelConfig& config,
                                                         const HfLoadOptions& options = {},
                                                         const LoadProgress& progress = {});
  // One tensor-parallel rank's part of these weights (model/tensor_parallel_plan.h), whose
  // config is rank_config(): row slices are views (no copy), column slices of the attention
  // output and down projections are copied, in their own type where the cut falls on block
  // boundaries and dequantized to F32 where it would split a block. These weights must outlive
  // the shard.
  Expected<std::unique_ptr<ModelWeights>> shard(const RankShard& rank) const;
  // The multiple the FFN splits in over tensor-parallel ranks (plan_tensor_parallel's ffn_unit):
  // the down projection's block, so that its column slices stay in its type, and `minimum` at
  // least (the executors' panel or code-group widths).
  int64_t tensor_parallel_ffn_unit(int64_t minimum) const;
  // Whether every tensor is in computing order (what the CPU computes on).
  bool in_computing_order() const;

  const ModelConfig& config() const { return config_; }
  const Architecture& architecture() const { return architecture_; }
  uint64_t weight_bytes() const { return weight_bytes_; }

  const WeightTensor& token_embedding() const { return token_embedding_; }  // (vocab, hidden)
  const WeightTensor& output() const { return output_; }                    // (vocab, hidden); the embedding when tied
  const std::vector<float>& output_norm() const { return output_norm_; }    // (hidden,)
  const std::vector<float>& rope_freq_factors() const { return rope_freq_factors_; }  // Llama-3, or empty
  const std::vector<LayerWeights>& layers() const { return layers_; }
  // Calibration layer by layer (backend/cpu/layer_runner.h) runs a layer on other values (its
  // quantized ones): the caller swaps them in, and back before they go.
  void swap_layer(int32_t layer, LayerWeights& other) { std::swap(layers_[static_cast<size_t>(layer)], other); }
  bool tied_embeddings() const { return output_.data == token_embedding_.data; }

 private:
  ModelWeights() = default;

  ModelConfig config_;
  Architecture architecture_;
  WeightTensor token_embedding_;
  WeightTensor output_;
  std::vector<float> output_norm_;
  std::vector<float> rope_freq_factors_;
  std::vector<LayerWeights> layers_;
  uint64_t weight_bytes_ = 0;
  std::vector<std::vector<uint8_t>> owned_;  // weights that are not views (reordered Q / K rows)
};

}  // namespace folio
