#include "backend/cuda/cuda_model.h"

#include <cmath>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gather_rows.h"

namespace folio::cuda {
namespace {

size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

Expected<std::unique_ptr<CudaModel>> CudaModel::create(
    const LlamaModel& model, const CudaModelLimits& limits, int32_t sm_count,
    const std::function<void(uint64_t, uint64_t)>& progress) {
  std::unique_ptr<CudaModel> m(new CudaModel());
  m->config_ = model.config();
  m->limits_ = limits;
  m->sm_count_ = sm_count;
  const ModelConfig& c = m->config_;
  if (c.head_dim != 64 && c.head_dim != 128) {
    return Status::error("cuda: head_dim " + std::to_string(c.head_dim) +
                         " is not supported by the attention kernels (64 or 128)");
  }
  if (Status s = upload_weights(model, m->weights_, progress); !s) return s;
  Expected<std::unique_ptr<CublasLtGemm>> gemm = CublasLtGemm::create();
  if (!gemm) return gemm.status();
  m->gemm_ = std::move(gemm).value();

  const size_t t = static_cast<size_t>(limits.max_tokens);
  const size_t r = static_cast<size_t>(limits.max_logit_rows);
  const size_t hidden = static_cast<size_t>(c.hidden_dim);
  const size_t qkv = static_cast<size_t>(c.q_dim()) + 2 * static_cast<size_t>(c.kv_dim());
  const size_t q = static_cast<size_t>(c.q_dim());
  const size_t ffn = static_cast<size_t>(c.ffn_dim);
  const size_t workspace = attention_workspace_bytes(limits.max_seqs, c.num_heads, c.num_kv_heads,
                                                     c.head_dim, limits.max_context_len, sm_count);
  size_t size = 0;
  auto take = [&](size_t bytes) {
    const size_t at = size;
    size += align256(bytes);
    return at;
  };
  const size_t x_at = take(t * hidden * 4), normed_at = take(t * hidden * 2), qkv_at = take(t * qkv * 4),
               q_at = take(t * q * 2), attn_at = take(t * q * 2), gate_up_at = take(t * 2 * ffn * 4),
               act_at = take(t * ffn * 2), final_x_at = take(r * hidden * 4),
               final_normed_at = take(r * hidden * 2), logits_at = take(r * c.vocab_size * 4),
               workspace_at = take(workspace);
  if (Status s = cuda_status(m->activations_.allocate(size), "allocating activations"); !s) return s;
  auto* base = m->activations_.get<uint8_t>();
  m->x_ = reinterpret_cast<float*>(base + x_at);
  m->normed_ = reinterpret_cast<uint16_t*>(base + normed_at);
  m->qkv_ = reinterpret_cast<float*>(base + qkv_at);
  m->q_ = reinterpret_cast<uint16_t*>(base + q_at);
  m->attn_ = reinterpret_cast<uint16_t*>(base + attn_at);
  m->gate_up_ = reinterpret_cast<float*>(base + gate_up_at);
  m->act_ = reinterpret_cast<uint16_t*>(base + act_at);
  m->final_x_ = reinterpret_cast<float*>(base + final_x_at);
  m->final_normed_ = reinterpret_cast<uint16_t*>(base + final_normed_at);
  m->logits_ = reinterpret_cast<float*>(base + logits_at);
  m->attention_workspace_ = Workspace{workspace > 0 ? base + workspace_at : nullptr, workspace};

  m->rope_ = DeviceRope{c.rope_style, c.rope_dim, c.rope_freq_base, c.rope_position_scale,
                        m->weights_.rope_freq_factors};
  return Expected<std::unique_ptr<CudaModel>>(std::move(m));
}

Status CudaModel::tune_pinned_gemms(cudaStream_t stream,
                                    const std::function<void(const PinnedTuning&)>& on_shape) {
  const ModelConfig& c = config_;
  const DeviceLayer& layer = weights_.layers.front();
  const int64_t t = limits_.max_tokens;
  const int64_t qkv_dim = c.q_dim() + 2 * static_cast<int64_t>(c.kv_dim());
  struct Shape {
    const void* x;
    const void* w;
    float* y;
    int64_t max_n, m, k;
    float beta;  // as forward() calls it: O and down add into the residual stream
  };
  const Shape shapes[] = {
      {normed_, layer.qkv, qkv_, t, qkv_dim, c.hidden_dim, 0.0f},
      {attn_, layer.o, x_, t, c.hidden_dim, c.q_dim(), 1.0f},
      {normed_, layer.gate_up, gate_up_, t, 2 * static_cast<int64_t>(c.ffn_dim), c.hidden_dim, 0.0f},
      {act_, layer.down, x_, t, c.hidden_dim, c.ffn_dim, 1.0f},
      {final_normed_, weights_.output, logits_, limits_.max_logit_rows, c.vocab_size, c.hidden_dim, 0.0f}};
  // Inputs of about 0.01 (bf16 0x3c3c): timings on live-looking values, not on zeros.
  if (Status s = cuda_status(cudaMemsetAsync(activations_.get(), 0x3c, activations_.bytes(), stream), "tuning");
      !s) {
    return s;
  }
  for (const Shape& s : shapes) {
    Expected<PinnedTuning> tuning = gemm_->tune_pinned(s.x, s.w, s.y, s.max_n, s.m, s.k, s.beta, stream);
    if (!tuning) return tuning.status();
    if (on_shape) on_shape(*tuning);
  }
  if (Status s = cuda_status(cudaMemsetAsync(activations_.get(), 0, activations_.bytes(), stream), "tuning"); !s) {
    return s;
  }
  return cuda_status(cudaStreamSynchronize(stream), "tuning GEMMs");
}

void CudaModel::forward(const DeviceBatch& batch, std::span<const KvLayerView> kv, cudaStream_t stream) {
  const ModelConfig& c = config_;
  const int32_t n = batch.num_tokens;
  const int64_t qkv_dim = c.q_dim() + 2 * static_cast<int64_t>(c.kv_dim());
  embed_rows(weights_.embedding, c.vocab_size, c.hidden_dim, batch.tokens, n, x_, stream);
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const DeviceLayer& layer = weights_.layers[static_cast<size_t>(i)];
    rms_norm(x_, nullptr, layer.attn_norm, normed_, n, c.hidden_dim, c.rms_norm_eps, stream);
    gemm_->matmul(normed_, layer.qkv, qkv_, n, qkv_dim, c.hidden_dim, 0.0f, stream);
    rope_write_kv(qkv_, layer.qkv_bias, batch.positions, batch.slot_mapping, n, c.num_heads, rope_, q_,
                  kv[static_cast<size_t>(i)], stream);
    PagedAttentionArgs args;
    args.q = q_;
    args.out = attn_;
    args.cache = kv[static_cast<size_t>(i)];
    args.cu_query_starts = batch.cu_query_starts;
    args.context_lens = batch.context_lens;
    args.block_tables = batch.block_tables;
    args.max_blocks_per_seq = batch.max_blocks_per_seq;
    args.num_seqs = batch.num_seqs;
    args.num_tokens = n;
    args.num_heads = c.num_heads;
    args.max_query_len = batch.max_query_len;
    args.max_context_len = batch.max_context_len;
    args.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    paged_attention(args, attention_workspace_, sm_count_, stream);
    gemm_->matmul(attn_, layer.o, x_, n, c.hidden_dim, c.q_dim(), 1.0f, stream);

    rms_norm(x_, nullptr, layer.ffn_norm, normed_, n, c.hidden_dim, c.rms_norm_eps, stream);
    gemm_->matmul(normed_, layer.gate_up, gate_up_, n, 2 * static_cast<int64_t>(c.ffn_dim), c.hidden_dim,
                  0.0f, stream);
    swiglu(gate_up_, n, c.ffn_dim, act_, stream);
    gemm_->matmul(act_, layer.down, x_, n, c.hidden_dim, c.ffn_dim, 1.0f, stream);
  }
}

void CudaModel::logits(const DeviceBatch& batch, int32_t first, int32_t count, cudaStream_t stream) {
  const ModelConfig& c = config_;
  gather_rows(x_, batch.logit_rows + first, count, c.hidden_dim, final_x_, stream);
  rms_norm(final_x_, nullptr, weights_.output_norm, final_normed_, count, c.hidden_dim, c.rms_norm_eps,
           stream);
  gemm_->matmul(final_normed_, weights_.output, logits_, count, c.vocab_size, c.hidden_dim, 0.0f, stream);
}

}  // namespace folio::cuda
