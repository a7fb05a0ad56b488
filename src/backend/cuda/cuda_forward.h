// The GPU's side of the transformer recipe (model/transformer_recipe.h): each step as kernels
// and cuBLASLt GEMMs on device buffers, for one DeviceBatch over the device KV pool. Fusions the
// GPU wants live here, not in the recipe: Q|K|V is one GEMM whose bias is added by the RoPE +
// K/V-write kernel, gate|up one GEMM, and the O and down GEMMs accumulate straight into the FP32
// residual stream (beta = 1). Nothing allocates or synchronizes, so a decode step can be
// captured in a CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "backend/cuda/cublaslt_gemm.h"
#include "backend/cuda/cuda_weights.h"
#include "backend/cuda/device_rank.h"
#include "backend/cuda/kernels/kernels.h"
#include "model/model_config.h"
#include "model/transformer_recipe.h"

namespace folio::cuda {

// One forward's inputs, all device pointers (static buffers when the step is a graph replay).
struct DeviceBatch {
  const int32_t* tokens = nullptr;           // (num_tokens,)
  const int32_t* positions = nullptr;        // (num_tokens,)
  const int32_t* slot_mapping = nullptr;     // (num_groups, group_slots_stride) -1: no K/V write
  const int32_t* cu_query_starts = nullptr;  // (num_seqs + 1,)
  const int32_t* context_lens = nullptr;     // (num_seqs,)
  const int32_t* block_tables = nullptr;     // (num_groups, num_seqs, max_blocks_per_seq)
  const int32_t* logit_rows = nullptr;       // (num_logit_rows,) token indices
  const int32_t* num_seals = nullptr;        // residual formats: (1,) blocks this pass seals
  const int32_t* seals = nullptr;            // (max_seals, 2) (block, staging) pairs
  int32_t max_seals = 0;                     // the seal launch's grid (0: none)
  int32_t num_tokens = 0;
  int32_t num_seqs = 0;
  int32_t max_blocks_per_seq = 0;
  int32_t max_query_len = 0;
  int32_t max_context_len = 0;
  int32_t num_logit_rows = 0;
  // Block-table groups (kv/kv_groups.h: sliding-window layers keep their own tables): group g's
  // slots start g * group_slots_stride entries after slot_mapping, its tables
  // g * group_tables_stride after block_tables; layer_group, in host memory, names each layer's
  // group (empty: every layer in group 0).
  int32_t group_slots_stride = 0;
  int32_t group_tables_stride = 0;
  std::span<const int32_t> layer_group{};

  const int32_t* slots_of(int32_t layer) const { return slot_mapping + group_of(layer) * group_slots_stride; }
  const int32_t* tables_of(int32_t layer) const { return block_tables + group_of(layer) * group_tables_stride; }
  int32_t group_of(int32_t layer) const { return layer_group.empty() ? 0 : layer_group[static_cast<size_t>(layer)]; }
};

// Activation buffers, allocated once for the model's limits (cuda_model.h).
struct CudaActivations {
  float* x = nullptr;                // (max_tokens, hidden) fp32 residual stream
  uint16_t* normed = nullptr;        // (max_tokens, hidden) bf16
  float* qkv = nullptr;              // (max_tokens, q_dim + 2 kv_dim) fp32
  uint16_t* q = nullptr;             // (max_tokens, q_dim) fp16, roped
  uint16_t* attn = nullptr;          // (max_tokens, q_dim) bf16
  float* proj = nullptr;             // (max_tokens, hidden) fp32: O / down outputs before a post norm
                                     // or (tensor parallel) before the all-reduce
  float* gate_up = nullptr;          // (max_tokens, 2 ffn) fp32
  uint16_t* act = nullptr;           // (max_tokens, ffn) bf16
  float* final_x = nullptr;          // (max_logit_rows, hidden) fp32, gathered rows
  uint16_t* final_normed = nullptr;  // (max_logit_rows, hidden) bf16
  float* logits = nullptr;           // (max_logit_rows, vocab) fp32, the whole vocabulary
  // Tensor parallel: this rank's logits (max_logit_rows, its vocabulary slice), then every
  // rank's, (ranks, max_logit_rows * widest slice), before they are stitched into logits.
  float* vocab_slice = nullptr;
  float* vocab_gathered = nullptr;
  Workspace attention_workspace;
};

class CudaForward {
 public:
  CudaForward(const ModelConfig& config, const Architecture& arch, const DeviceWeights& weights, CublasLtGemm& gemm,
              const CudaActivations& a, int32_t sm_count, const DeviceBatch& batch, std::span<const KvLayerView> kv,
              cudaStream_t stream, const DeviceRank* tp = nullptr)
      : c_(config),
        arch_(arch),
        w_(weights),
        gemm_(gemm),
        a_(a),
        sm_count_(sm_count),
        batch_(batch),
        kv_(kv),
        stream_(stream),
        tp_(tp) {}

  void embed();
  void norm(NormSite site, int32_t layer);
  void project_qkv(int32_t layer);
  void rope_and_store_kv(int32_t layer, const RopeSpec& rope);
  void attend(int32_t layer, float scale, int32_t window);
  void project_output_add(int32_t layer);
  void project_gate_up_activate(int32_t layer, Activation activation);
  void project_down_add(int32_t layer);
  // Gemma's steps: the O and down GEMMs into proj, then the post norm adds it to x.
  void qk_norm(int32_t layer);
  void project_output(int32_t layer);
  void project_down(int32_t layer);
  void post_norm_add(NormSite site, int32_t layer);
  void gather_logit_rows(int32_t first, int32_t count);
  void final_norm(int32_t count);
  void project_vocab(int32_t count);
  // Tensor parallel: the last residual add still pending (the last down projection's, which no
  // norm of a next layer takes in); call at the end of the layers.
  void finish_residual();

 private:
  // Tensor parallel: sums every rank's partial product in proj (n rows); the add into the
  // residual stream rides on the next norm (rms_norm's add) or finish_residual().
  void all_reduce_rows(float* rows, int32_t n) {
    tp_->collectives->all_reduce_sum(tp_->rank, rows, static_cast<size_t>(n) * c_.hidden_dim, stream_);
  }
  const DeviceLayer& layer(int32_t l) const { return w_.layers[static_cast<size_t>(l)]; }
  // Act-order matrices whose input the kernel before them writes in their order
  // (GemmPolicy::inputs_written_in_order): the positions that kernel writes to, and the matrix
  // as the product then reads it (no input order left). Both null / unchanged otherwise.
  const int32_t* written_order(const DeviceMatrix& m) const {
    const GemmPolicy& p = gemm_.policy();
    const bool in_order = p.inputs_written_in_order && batch_.num_tokens <= p.inputs_written_in_order_max_rows;
    return in_order ? m.input_position : nullptr;
  }
  DeviceMatrix read_in_order(const DeviceMatrix& m) const {
    DeviceMatrix plain = m;
    if (written_order(m) != nullptr) plain.input_order = nullptr;
    return plain;
  }

  const ModelConfig& c_;
  const Architecture& arch_;
  const DeviceWeights& w_;
  CublasLtGemm& gemm_;
  const CudaActivations& a_;
  int32_t sm_count_;
  const DeviceBatch& batch_;
  std::span<const KvLayerView> kv_;
  cudaStream_t stream_;
  const DeviceRank* tp_;
  const float* pending_add_ = nullptr;  // tensor parallel: added to x by the next norm
};

}  // namespace folio::cuda
