#include "backend/cpu/cpu_forward.h"

#include <algorithm>

namespace folio::cpu {

void CpuActivations::resize(const ModelConfig& c, int32_t num_tokens) {
  const size_t n = static_cast<size_t>(num_tokens);
  x.resize(n * c.hidden_dim);
  normed.resize(x.size());
  proj.resize(x.size());
  q.resize(n * c.q_dim());
  attn.resize(q.size());
  k.resize(n * c.kv_dim());
  v.resize(k.size());
  gate.resize(n * c.ffn_dim);
  up.resize(gate.size());
}

CpuForward::CpuForward(const ModelWeights& weights, Backend& backend, KvCacheStorage& cache, const ForwardBatch& batch,
                       CpuActivations& a, float* logits, ActivationStats* stats, const KvGroups* groups,
                       const PreparedWeights* prepared, const TensorParallelRank* tp)
    : weights_(weights),
      c_(weights.config()),
      backend_(backend),
      cache_(cache),
      batch_(batch),
      groups_(groups),
      a_(a),
      logits_(logits),
      stats_(stats),
      prepared_(prepared),
      tp_(tp),
      n_(batch.num_tokens()) {
  a_.resize(c_, n_);
}

void CpuForward::embed() {
  if (tp_ != nullptr) {
    embed_vocab_shard();
  } else {
    backend_.embed(weights_.token_embedding(), batch_.tokens, a_.x.data());
  }
  const float scale = weights_.architecture().embedding_scale;
  if (scale != 1.0f) backend_.scale(a_.x.data(), scale, static_cast<int64_t>(n_) * c_.hidden_dim);
}

// Each rank looks up the tokens in its rows and leaves zeros for the rest; the sum over ranks is
// every token's row, exactly (one term is not zero).
void CpuForward::embed_vocab_shard() {
  const WeightTensor& table = weights_.token_embedding();
  const size_t hidden = static_cast<size_t>(c_.hidden_dim);
  std::fill(a_.x.begin(), a_.x.begin() + static_cast<std::ptrdiff_t>(n_ * hidden), 0.0f);
  for (int32_t t = 0; t < n_; ++t) {
    const int64_t row = batch_.tokens[static_cast<size_t>(t)] - tp_->vocab_begin;
    if (row < 0 || row >= table.rows) continue;
    const int32_t local[1] = {static_cast<int32_t>(row)};
    backend_.embed(table, local, a_.x.data() + static_cast<size_t>(t) * hidden);
  }
  all_reduce(a_.x.data(), n_ * hidden);
}

namespace {

const std::vector<float>& norm_weight(const LayerWeights& w, NormSite site) {
  switch (site) {
    case NormSite::kAttentionInput: return w.attn_norm;
    case NormSite::kMlpInput: return w.ffn_norm;
    case NormSite::kAttentionOutput: return w.post_attn_norm;
    case NormSite::kMlpOutput: return w.post_ffn_norm;
  }
  return w.attn_norm;
}

}  // namespace

void CpuForward::norm(NormSite site, int32_t layer) {
  const LayerWeights& w = layer_weights(layer);
  backend_.rms_norm(a_.x.data(), norm_weight(w, site).data(), a_.normed.data(), n_, c_.hidden_dim, c_.rms_norm_eps);
}

void CpuForward::qk_norm(int32_t layer) {
  // Every head is a row of head_dim: q is (n * heads) rows, k (n * kv_heads); in place.
  const LayerWeights& w = layer_weights(layer);
  backend_.rms_norm(a_.q.data(), w.q_norm.data(), a_.q.data(), static_cast<int64_t>(n_) * c_.num_heads, c_.head_dim,
                    c_.rms_norm_eps);
  backend_.rms_norm(a_.k.data(), w.k_norm.data(), a_.k.data(), static_cast<int64_t>(n_) * c_.num_kv_heads, c_.head_dim,
                    c_.rms_norm_eps);
}

void CpuForward::post_norm_add(NormSite site, int32_t layer) {
  const LayerWeights& w = layer_weights(layer);
  backend_.rms_norm(a_.proj.data(), norm_weight(w, site).data(), a_.proj.data(), n_, c_.hidden_dim, c_.rms_norm_eps);
  backend_.add(a_.x.data(), a_.proj.data(), static_cast<int64_t>(n_) * c_.hidden_dim);
}

void CpuForward::project_qkv(int32_t layer) {
  const LayerWeights& w = layer_weights(layer);
  if (stats_ != nullptr) stats_->add(MatrixInput::kAttention, layer, a_.normed.data(), n_);
  const WeightTensor* ws[3] = {&w.q, &w.k, &w.v};
  float* ys[3] = {a_.q.data(), a_.k.data(), a_.v.data()};
  backend_.matmul_shared_input(ws, a_.normed.data(), ys, n_);
  if (!w.q_bias.empty()) backend_.add_bias(a_.q.data(), w.q_bias.data(), n_, c_.q_dim());
  if (!w.k_bias.empty()) backend_.add_bias(a_.k.data(), w.k_bias.data(), n_, c_.kv_dim());
  if (!w.v_bias.empty()) backend_.add_bias(a_.v.data(), w.v_bias.data(), n_, c_.kv_dim());
}

void CpuForward::rope_and_store_kv(int32_t layer, const RopeSpec& spec) {
  const std::vector<float>& factors = weights_.rope_freq_factors();
  const RopeParams rope{spec.style, spec.rotary_dim, spec.freq_base, spec.position_scale,
                        factors.empty() ? nullptr : factors.data()};
  backend_.rope(a_.q.data(), batch_.positions, c_.num_heads, c_.head_dim, rope);
  backend_.rope(a_.k.data(), batch_.positions, c_.num_kv_heads, c_.head_dim, rope);
  const LayerKv kv = layer_kv(layer);
  backend_.write_kv(kv.cache, a_.k.data(), a_.v.data(), kv.slot_mapping);
  backend_.seal_kv(kv.cache, kv.seals);
}

CpuForward::LayerKv CpuForward::layer_kv(int32_t layer) {
  if (groups_ == nullptr) return {cache_.layer(layer), batch_.slot_mapping, batch_.sequences, batch_.seals};
  const int32_t group = groups_->layer_group[static_cast<size_t>(layer)];
  const KvLayerView cache = cache_.layer(groups_->layer_slot[static_cast<size_t>(layer)]);
  if (group == 0) return {cache, batch_.slot_mapping, batch_.sequences, batch_.seals};
  const KvGroupInputs& inputs = batch_.more_kv_groups[static_cast<size_t>(group - 1)];
  return {cache, inputs.slot_mapping, inputs.sequences, inputs.seals};
}

void CpuForward::attend(int32_t layer, float scale, int32_t window) {
  const LayerKv kv = layer_kv(layer);
  const AttentionBatch attention{a_.q.data(), a_.attn.data(), n_, c_.num_heads, scale, kv.sequences, window};
  backend_.attention(attention, kv.cache);
}

void CpuForward::project_output(int32_t layer) {
  const LayerWeights& w = layer_weights(layer);
  if (stats_ != nullptr) stats_->add(MatrixInput::kAttentionOutput, layer, a_.attn.data(), n_);
  backend_.matmul(w.o, a_.attn.data(), a_.proj.data(), n_);
  all_reduce(a_.proj.data(), static_cast<size_t>(n_) * c_.hidden_dim);
}

void CpuForward::project_output_add(int32_t layer) {
  project_output(layer);
  backend_.add(a_.x.data(), a_.proj.data(), static_cast<int64_t>(n_) * c_.hidden_dim);
}

void CpuForward::project_gate_up_activate(int32_t layer, Activation activation) {
  const LayerWeights& w = layer_weights(layer);
  if (stats_ != nullptr) stats_->add(MatrixInput::kFfn, layer, a_.normed.data(), n_);
  if (activation == Activation::kSwiGlu) {
    backend_.matmul_swiglu(w.gate, w.up, a_.normed.data(), a_.gate.data(), a_.up.data(), n_);
    return;
  }
  const WeightTensor* ws[2] = {&w.gate, &w.up};
  float* ys[2] = {a_.gate.data(), a_.up.data()};
  backend_.matmul_shared_input(ws, a_.normed.data(), ys, n_);
  backend_.geglu_tanh(a_.gate.data(), a_.up.data(), a_.gate.data(), static_cast<int64_t>(n_) * c_.ffn_dim);
}

void CpuForward::project_down(int32_t layer) {
  const LayerWeights& w = layer_weights(layer);
  if (stats_ != nullptr) stats_->add(MatrixInput::kFfnHidden, layer, a_.gate.data(), n_);
  backend_.matmul(w.down, a_.gate.data(), a_.proj.data(), n_);
  all_reduce(a_.proj.data(), static_cast<size_t>(n_) * c_.hidden_dim);
}

void CpuForward::project_down_add(int32_t layer) {
  project_down(layer);
  backend_.add(a_.x.data(), a_.proj.data(), static_cast<int64_t>(n_) * c_.hidden_dim);
}

void CpuForward::gather_logit_rows(int32_t first, int32_t count) {
  // Only the rows that need logits go through the final norm and the vocabulary projection.
  for (int32_t r = 0; r < count; ++r) {
    const float* src = a_.x.data() + static_cast<size_t>(batch_.logit_rows[first + r]) * c_.hidden_dim;
    std::copy(src, src + c_.hidden_dim, a_.proj.data() + static_cast<size_t>(r) * c_.hidden_dim);
  }
}

void CpuForward::final_norm(int32_t count) {
  backend_.rms_norm(a_.proj.data(), weights_.output_norm().data(), a_.normed.data(), count, c_.hidden_dim,
                    c_.rms_norm_eps);
}

void CpuForward::project_vocab(int32_t count) {
  backend_.matmul(prepared_ != nullptr ? prepared_->output() : weights_.output(), a_.normed.data(), logits_, count);
}

}  // namespace folio::cpu
