#include "backend/cuda/cuda_forward.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gather_rows.h"
#include "backend/cuda/rank_sum.h"

namespace folio::cuda {

void CudaForward::embed() {
  // A rank's table is its vocabulary slice: other tokens embed as zeros, which the sum fills.
  embed_rows(w_.embedding, c_.vocab_size, c_.hidden_dim, batch_.tokens, batch_.num_tokens, a_.x, stream_,
             arch_.embedding_scale, tp_ != nullptr ? tp_->shard().vocab_begin : 0);
  if (tp_ != nullptr) all_reduce_rows(a_.x, batch_.num_tokens);
}

void CudaForward::norm(NormSite site, int32_t l) {
  const bool attention = site == NormSite::kAttentionInput;
  const float* weight = attention ? layer(l).attn_norm : layer(l).ffn_norm;
  rms_norm(a_.x, pending_add_, weight, a_.normed, batch_.num_tokens, c_.hidden_dim, c_.rms_norm_eps, stream_,
           written_order(attention ? layer(l).qkv : layer(l).gate_up));
  pending_add_ = nullptr;
}

void CudaForward::finish_residual() {
  if (pending_add_ == nullptr) return;
  add_in_place(a_.x, pending_add_, static_cast<size_t>(batch_.num_tokens) * c_.hidden_dim, stream_);
  pending_add_ = nullptr;
}

void CudaForward::project_qkv(int32_t l) {
  const int64_t qkv_dim = c_.q_dim() + 2 * static_cast<int64_t>(c_.kv_dim());
  gemm_.matmul(a_.normed, read_in_order(layer(l).qkv), a_.qkv, batch_.num_tokens, qkv_dim, c_.hidden_dim, 0.0f,
               stream_);
}

void CudaForward::rope_and_store_kv(int32_t l, const RopeSpec& spec) {
  const DeviceRope rope{spec.style, spec.rotary_dim, spec.position_scale, layer(l).rope_inv_freq};
  // The bias of the Q|K|V GEMM is added here, in the same pass.
  rope_write_kv(a_.qkv, layer(l).qkv_bias, batch_.positions, batch_.slots_of(l), batch_.num_tokens, c_.num_heads, rope,
                a_.q, kv_[static_cast<size_t>(l)], stream_);
  // Residual formats: the blocks this pass filled are quantized before attention reads them sealed.
  if (batch_.max_seals > 0) {
    kv_seal_blocks(kv_[static_cast<size_t>(l)], batch_.seals, batch_.num_seals, batch_.max_seals, stream_);
  }
}

void CudaForward::qk_norm(int32_t l) {
  // In place in the fp32 Q|K|V rows, before rope_write_kv reads them (CudaModel::create
  // refuses a QKV bias here: the CPU adds it before the norm, the RoPE kernel after).
  rms_norm_heads(a_.qkv, layer(l).q_norm, layer(l).k_norm, batch_.num_tokens, c_.num_heads, c_.num_kv_heads,
                 c_.head_dim, c_.rms_norm_eps, stream_);
}

void CudaForward::attend(int32_t l, float scale, int32_t window) {
  PagedAttentionArgs args;
  args.window = window;
  args.q = a_.q;
  args.out = a_.attn;
  args.cache = kv_[static_cast<size_t>(l)];
  args.cu_query_starts = batch_.cu_query_starts;
  args.context_lens = batch_.context_lens;
  args.block_tables = batch_.tables_of(l);
  args.max_blocks_per_seq = batch_.max_blocks_per_seq;
  args.num_seqs = batch_.num_seqs;
  args.num_tokens = batch_.num_tokens;
  args.num_heads = c_.num_heads;
  args.max_query_len = batch_.max_query_len;
  args.max_context_len = batch_.max_context_len;
  args.scale = scale;
  args.slot_mapping = batch_.slots_of(l);
  paged_attention(args, a_.attention_workspace, sm_count_, stream_);
}

void CudaForward::project_output_add(int32_t l) {
  if (tp_ != nullptr) {
    project_output(l);
    pending_add_ = a_.proj;
    return;
  }
  gemm_.matmul(a_.attn, layer(l).o, a_.x, batch_.num_tokens, c_.hidden_dim, c_.q_dim(), 1.0f, stream_);
}

void CudaForward::project_output(int32_t l) {
  gemm_.matmul(a_.attn, layer(l).o, a_.proj, batch_.num_tokens, c_.hidden_dim, c_.q_dim(), 0.0f, stream_);
  if (tp_ != nullptr) all_reduce_rows(a_.proj, batch_.num_tokens);
}

void CudaForward::project_gate_up_activate(int32_t l, Activation activation) {
  gemm_.matmul(a_.normed, read_in_order(layer(l).gate_up), a_.gate_up, batch_.num_tokens,
               2 * static_cast<int64_t>(c_.ffn_dim), c_.hidden_dim, 0.0f, stream_);
  const int32_t* down_order = written_order(layer(l).down);
  if (activation == Activation::kGeGluTanh) {
    geglu_tanh(a_.gate_up, batch_.num_tokens, c_.ffn_dim, a_.act, stream_, down_order);
  } else {
    swiglu(a_.gate_up, batch_.num_tokens, c_.ffn_dim, a_.act, stream_, down_order);
  }
}

void CudaForward::project_down(int32_t l) {
  gemm_.matmul(a_.act, read_in_order(layer(l).down), a_.proj, batch_.num_tokens, c_.hidden_dim, c_.ffn_dim, 0.0f,
               stream_);
  if (tp_ != nullptr) all_reduce_rows(a_.proj, batch_.num_tokens);
}

void CudaForward::post_norm_add(NormSite site, int32_t l) {
  const float* weight = site == NormSite::kAttentionOutput ? layer(l).post_attn_norm : layer(l).post_ffn_norm;
  rms_norm_into_residual(a_.x, a_.proj, weight, batch_.num_tokens, c_.hidden_dim, c_.rms_norm_eps, stream_);
}

void CudaForward::project_down_add(int32_t l) {
  if (tp_ != nullptr) {
    project_down(l);
    pending_add_ = a_.proj;
    return;
  }
  gemm_.matmul(a_.act, read_in_order(layer(l).down), a_.x, batch_.num_tokens, c_.hidden_dim, c_.ffn_dim, 1.0f, stream_);
}

void CudaForward::gather_logit_rows(int32_t first, int32_t count) {
  gather_rows(a_.x, batch_.logit_rows + first, count, c_.hidden_dim, a_.final_x, stream_);
}

void CudaForward::final_norm(int32_t count) {
  rms_norm(a_.final_x, nullptr, w_.output_norm, a_.final_normed, count, c_.hidden_dim, c_.rms_norm_eps, stream_);
}

void CudaForward::project_vocab(int32_t count) {
  if (tp_ == nullptr) {
    gemm_.matmul(a_.final_normed, w_.output, a_.logits, count, c_.vocab_size, c_.hidden_dim, 0.0f, stream_);
    return;
  }
  // This rank's slice of every row, then every rank's slices side by side in each row. The
  // all-gather sends equal counts: each rank's (count, its slice) rows, padded to the widest.
  gemm_.matmul(a_.final_normed, w_.output, a_.vocab_slice, count, c_.vocab_size, c_.hidden_dim, 0.0f, stream_);
  const size_t widest = static_cast<size_t>(tp_->max_vocab_slice());
  const size_t per_rank = static_cast<size_t>(count) * widest;
  tp_->collectives->all_gather(tp_->rank, a_.vocab_slice, a_.vocab_gathered, per_rank, stream_);
  const size_t vocab = static_cast<size_t>(tp_->full_config.vocab_size);
  for (size_t r = 0; r < tp_->shards.size(); ++r) {
    const RankShard& s = tp_->shards[r];
    const size_t width = static_cast<size_t>(s.vocab_count) * sizeof(float);
    FOLIO_CUDA_CHECK(cudaMemcpy2DAsync(a_.logits + s.vocab_begin, vocab * sizeof(float),
                                       a_.vocab_gathered + r * per_rank, width, width, static_cast<size_t>(count),
                                       cudaMemcpyDeviceToDevice, stream_));
  }
}

}  // namespace folio::cuda
