#include "backend/cuda/cuda_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "backend/cuda/cuda_check.h"

namespace folio::cuda {
namespace {

size_t align256(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

}  // namespace

Expected<std::unique_ptr<CudaModel>> CudaModel::create(const ModelWeights& model, const CudaModelLimits& limits,
                                                       int32_t sm_count, WeightFormat format,
                                                       const std::function<void(uint64_t, uint64_t)>& progress,
                                                       const DeviceRank* tp) {
  std::unique_ptr<CudaModel> m(new CudaModel());
  m->config_ = model.config();
  m->tp_ = tp;
  m->architecture_ = model.architecture();
  m->limits_ = limits;
  m->sm_count_ = sm_count;
  const ModelConfig& c = m->config_;
  const Architecture& arch = m->architecture_;
  // Head sizes other than 64 / 128 and sliding windows run on the reference attention kernel
  // (kernels.h), which covers 32..256.
  if (c.head_dim % 32 != 0 || c.head_dim > 256) {
    return Status::error("cuda: head_dim " + std::to_string(c.head_dim) +
                         " is not supported by the attention kernels (a multiple of 32 up to 256)");
  }
  if (arch.qk_norm && std::any_of(model.layers().begin(), model.layers().end(),
                                  [](const LayerWeights& l) { return !l.q_bias.empty() || !l.k_bias.empty(); })) {
    // The RoPE kernel adds the QKV bias, after the QK norm: right only without a bias.
    return Status::error("cuda: QK norm together with a Q/K bias is not supported on the GPU: use --device cpu");
  }
  if (Status s = upload_weights(model, m->weights_, format, progress); !s) return s;
  Expected<std::unique_ptr<CublasLtGemm>> gemm = CublasLtGemm::create();
  if (!gemm) return gemm.status();
  m->gemm_ = std::move(gemm).value();
  if (format == WeightFormat::kFp8E4M3) {
    const int64_t widest = std::max<int64_t>({c.hidden_dim, c.q_dim(), c.ffn_dim});
    if (Status s = m->gemm_->reserve_fp8_activations(limits.max_tokens, widest); !s) return s;
  }
  if (m->weights_.int4_matrices + m->weights_.int8_matrices > 0) {
    if (Status s = m->gemm_->reserve_dequantize_scratch(m->weights_.largest_grouped_elems); !s) return s;
  }
  if (m->weights_.ordered_matrices > 0) {
    if (Status s = m->gemm_->reserve_input_gather(limits.max_tokens, m->weights_.widest_ordered); !s) return s;
  }

  const size_t t = static_cast<size_t>(limits.max_tokens);
  const size_t r = static_cast<size_t>(limits.max_logit_rows);
  const size_t hidden = static_cast<size_t>(c.hidden_dim);
  const size_t qkv = static_cast<size_t>(c.q_dim()) + 2 * static_cast<size_t>(c.kv_dim());
  const size_t q = static_cast<size_t>(c.q_dim());
  const size_t ffn = static_cast<size_t>(c.ffn_dim);
  // Tensor parallel: the whole vocabulary's logits, this rank's slice, every rank's slices.
  const size_t vocab = static_cast<size_t>(m->logits_vocab());
  const size_t ranks = tp != nullptr ? tp->shards.size() : 0;
  const size_t widest_slice = tp != nullptr ? static_cast<size_t>(tp->max_vocab_slice()) : 0;
  const size_t workspace = attention_workspace_bytes(limits.max_seqs, c.num_heads, c.num_kv_heads, c.head_dim,
                                                     limits.max_context_len, sm_count);
  size_t size = 0;
  auto take = [&](size_t bytes) {
    const size_t at = size;
    size += align256(bytes);
    return at;
  };
  const size_t x_at = take(t * hidden * 4), normed_at = take(t * hidden * 2), qkv_at = take(t * qkv * 4),
               q_at = take(t * q * 2), attn_at = take(t * q * 2),
               proj_at = arch.post_norms || tp != nullptr ? take(t * hidden * 4) : SIZE_MAX,
               gate_up_at = take(t * 2 * ffn * 4), act_at = take(t * ffn * 2), final_x_at = take(r * hidden * 4),
               final_normed_at = take(r * hidden * 2), logits_at = take(r * vocab * 4),
               slice_at = take(r * widest_slice * 4), gathered_at = take(ranks * r * widest_slice * 4),
               workspace_at = take(workspace);
  if (Status s = m->activation_memory_.allocate(size, "allocating activations"); !s) return s;
  auto* base = m->activation_memory_.get<uint8_t>();
  CudaActivations& a = m->activations_;
  a.x = reinterpret_cast<float*>(base + x_at);
  a.normed = reinterpret_cast<uint16_t*>(base + normed_at);
  a.qkv = reinterpret_cast<float*>(base + qkv_at);
  a.q = reinterpret_cast<uint16_t*>(base + q_at);
  a.attn = reinterpret_cast<uint16_t*>(base + attn_at);
  a.proj = proj_at == SIZE_MAX ? nullptr : reinterpret_cast<float*>(base + proj_at);
  a.gate_up = reinterpret_cast<float*>(base + gate_up_at);
  a.act = reinterpret_cast<uint16_t*>(base + act_at);
  a.final_x = reinterpret_cast<float*>(base + final_x_at);
  a.final_normed = reinterpret_cast<uint16_t*>(base + final_normed_at);
  a.logits = reinterpret_cast<float*>(base + logits_at);
  if (tp != nullptr) {
    a.vocab_slice = reinterpret_cast<float*>(base + slice_at);
    a.vocab_gathered = reinterpret_cast<float*>(base + gathered_at);
  }
  a.attention_workspace = Workspace{workspace > 0 ? base + workspace_at : nullptr, workspace};
  return Expected<std::unique_ptr<CudaModel>>(std::move(m));
}

Status CudaModel::tune_pinned_gemms(cudaStream_t stream, const std::function<void(const PinnedTuning&)>& on_shape) {
  const ModelConfig& c = config_;
  const DeviceLayer& layer = weights_.layers.front();
  const int64_t t = limits_.max_tokens;
  const int64_t qkv_dim = c.q_dim() + 2 * static_cast<int64_t>(c.kv_dim());
  struct Shape {
    const void* x;
    DeviceMatrix w;
    float* y;
    int64_t max_n, m, k;
    float beta;  // as forward() calls it: O and down add into the residual stream
  };
  const CudaActivations& a = activations_;
  // With post norms (Gemma) or tensor parallel, O and down write proj instead (beta = 0).
  const bool to_proj = architecture_.post_norms || tp_ != nullptr;
  float* o_out = to_proj ? a.proj : a.x;
  const float o_beta = to_proj ? 0.0f : 1.0f;
  const Shape shapes[] = {
      {a.normed, layer.qkv, a.qkv, t, qkv_dim, c.hidden_dim, 0.0f},
      {a.attn, layer.o, o_out, t, c.hidden_dim, c.q_dim(), o_beta},
      {a.normed, layer.gate_up, a.gate_up, t, 2 * static_cast<int64_t>(c.ffn_dim), c.hidden_dim, 0.0f},
      {a.act, layer.down, o_out, t, c.hidden_dim, c.ffn_dim, o_beta},
      {a.final_normed, weights_.output, tp_ != nullptr ? a.vocab_slice : a.logits, limits_.max_logit_rows, c.vocab_size,
       c.hidden_dim, 0.0f}};
  // Inputs of about 0.01 (bf16 0x3c3c): timings on live-looking values, not on zeros.
  if (Status s =
          cuda_status(cudaMemsetAsync(activation_memory_.get(), 0x3c, activation_memory_.bytes(), stream), "tuning");
      !s) {
    return s;
  }
  for (const Shape& s : shapes) {
    Expected<PinnedTuning> tuning = gemm_->tune_pinned(s.x, s.w, s.y, s.max_n, s.m, s.k, s.beta, stream);
    if (!tuning) return tuning.status();
    if (on_shape) on_shape(*tuning);
  }
  if (Status s =
          cuda_status(cudaMemsetAsync(activation_memory_.get(), 0, activation_memory_.bytes(), stream), "tuning");
      !s) {
    return s;
  }
  return cuda_status(cudaStreamSynchronize(stream), "tuning GEMMs");
}

void CudaModel::forward(const DeviceBatch& batch, std::span<const KvLayerView> kv, cudaStream_t stream) {
  CudaForward device = bind(batch, kv, stream);
  run_transformer_layers(architecture_, device);
  device.finish_residual();
}

void CudaModel::logits(const DeviceBatch& batch, int32_t first, int32_t count, cudaStream_t stream) {
  CudaForward device = bind(batch, {}, stream);
  run_transformer_head(device, first, count);
}

std::string CudaModel::describe_weight_format() const {
  if (weights_.layer_format != WeightFormat::kInt4) return weight_format_name(weights_.layer_format);
  const int32_t bf16 = weights_.num_matrices - weights_.int4_matrices - weights_.int8_matrices;
  return "quantized as the file is: " + std::to_string(weights_.int4_matrices) + " int4, " +
         std::to_string(weights_.int8_matrices) + " int8, " + std::to_string(bf16) + " bf16 of " +
         std::to_string(weights_.num_matrices) + " layer matrices" +
         (weights_.ordered_matrices > 0 ? " (" + std::to_string(weights_.ordered_matrices) + " in act-order)" : "");
}

}  // namespace folio::cuda
