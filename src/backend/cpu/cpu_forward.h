// The CPU's side of the transformer recipe (model/transformer_recipe.h): each step of the recipe
// as Backend ops on host activation buffers, for one ForwardBatch over the host KV storage.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/activation_stats.h"
#include "backend/cpu/in_process_all_reduce.h"
#include "backend/cpu/prepared_weights.h"
#include "executor/forward_batch.h"
#include "kv/kv_cache_storage.h"
#include "kv/kv_groups.h"
#include "model/model_weights.h"
#include "model/transformer_recipe.h"

namespace folio::cpu {

// Activations of one forward pass, reused from call to call (the engine is single-threaded).
struct CpuActivations {
  std::vector<float> x;       // (n, hidden) residual stream
  std::vector<float> normed;  // (n, hidden)
  std::vector<float> q;       // (n, q_dim)
  std::vector<float> k;       // (n, kv_dim)
  std::vector<float> v;       // (n, kv_dim)
  std::vector<float> attn;    // (n, q_dim)
  std::vector<float> proj;    // (n, hidden); the head's gathered rows too
  std::vector<float> gate;    // (n, ffn); silu(gate) * up after project_gate_up_activate()
  std::vector<float> up;      // (n, ffn)

  void resize(const ModelConfig& c, int32_t num_tokens);
};

// One tensor-parallel rank's place (model/tensor_parallel_plan.h): its weights are a shard, its
// embedding rows start at vocab_begin, and the partial sums of its row-parallel products (and
// of the vocabulary-parallel embedding) are completed through all_reduce.
struct TensorParallelRank {
  InProcessAllReduce* all_reduce = nullptr;
  int32_t rank = 0;
  int64_t vocab_begin = 0;
};

// One batch bound to the weights, the backend, the cache and the buffers: the Device the recipe
// runs. logits: (logit rows, vocab), written by project_vocab.
class CpuForward {
 public:
  // stats: null, or the importance statistics each matrix input adds to (activation_stats.h).
  // groups: which block-table group and storage slot each layer's K/V use (kv/kv_groups.h);
  // null: one group, layer l in slot l. prepared: the matrices as the backend packed them
  // (prepared_weights.h); null: the model's.
  CpuForward(const ModelWeights& weights, Backend& backend, KvCacheStorage& cache, const ForwardBatch& batch,
             CpuActivations& a, float* logits, ActivationStats* stats = nullptr, const KvGroups* groups = nullptr,
             const PreparedWeights* prepared = nullptr, const TensorParallelRank* tp = nullptr);

  void embed();
  void norm(NormSite site, int32_t layer);
  void project_qkv(int32_t layer);
  void qk_norm(int32_t layer);
  void rope_and_store_kv(int32_t layer, const RopeSpec& rope);
  void attend(int32_t layer, float scale, int32_t window);
  void project_output_add(int32_t layer);
  void project_output(int32_t layer);
  void project_gate_up_activate(int32_t layer, Activation activation);
  void project_down_add(int32_t layer);
  void project_down(int32_t layer);
  void post_norm_add(NormSite site, int32_t layer);
  void gather_logit_rows(int32_t first, int32_t count);
  void final_norm(int32_t count);
  void project_vocab(int32_t count);

 private:
  // A layer's view of the batch's K/V inputs: its group's slots, sequences and seals.
  struct LayerKv {
    KvLayerView cache;
    std::span<const int32_t> slot_mapping;
    std::span<const AttentionSequence> sequences;
    std::span<const KvSeal> seals;
  };
  LayerKv layer_kv(int32_t layer);
  void embed_vocab_shard();
  void all_reduce(float* data, size_t n) {
    if (tp_ != nullptr) tp_->all_reduce->sum(tp_->rank, data, n);
  }
  const LayerWeights& layer_weights(int32_t layer) const {
    return prepared_ != nullptr ? prepared_->layer(layer) : weights_.layers()[static_cast<size_t>(layer)];
  }

  const ModelWeights& weights_;
  const ModelConfig& c_;
  Backend& backend_;
  KvCacheStorage& cache_;
  const ForwardBatch& batch_;
  const KvGroups* groups_;
  CpuActivations& a_;
  float* logits_;
  ActivationStats* stats_;
  const PreparedWeights* prepared_;
  const TensorParallelRank* tp_;
  int32_t n_;
};

}  // namespace folio::cpu
