#include "model/llama_model.h"

#include <cmath>
#include <string>

#include "backend/cpu/quant/quant_kernels.h"

namespace folio {
namespace {

std::string shape_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// Finds a 2-D weight of GGUF shape [cols, rows] in a computable type.
Status load_matrix(const GgufFile& file, const std::string& name, int64_t cols, int64_t rows,
                   WeightTensor& out, bool optional = false) {
  const GgufTensorInfo* info = file.find_tensor(name);
  if (info == nullptr) {
    return optional ? Status::ok() : Status::error("model: tensor '" + name + "' is missing");
  }
  if (info->dims.size() != 2 || info->dims[0] != cols || info->dims[1] != rows) {
    return Status::error("model: tensor '" + name + "' has shape " + shape_string(info->dims) +
                         ", expected [" + std::to_string(cols) + ", " + std::to_string(rows) +
                         "]");
  }
  if (cpu::quant_kernels(info->type) == nullptr) {
    return Status::error("model: tensor '" + name + "' has type " +
                         std::string(dtype_name(info->type)) + ", which folio cannot compute with");
  }
  out = WeightTensor{info->type, rows, cols, file.tensor_data(*info)};
  return Status::ok();
}

// Small vectors (norms, biases, rope factors) are converted to float and owned.
Status load_vector(const GgufFile& file, const std::string& name, int64_t size,
                   std::vector<float>& out, bool optional = false) {
  const GgufTensorInfo* info = file.find_tensor(name);
  if (info == nullptr) {
    return optional ? Status::ok() : Status::error("model: tensor '" + name + "' is missing");
  }
  if (info->num_elements != static_cast<uint64_t>(size)) {
    return Status::error("model: tensor '" + name + "' has shape " + shape_string(info->dims) +
                         ", expected " + std::to_string(size) + " elements");
  }
  const cpu::QuantKernels* kernels = cpu::quant_kernels(info->type);
  if (kernels == nullptr || size % dtype_info(info->type).block_elems != 0) {
    return Status::error("model: tensor '" + name + "' has unsupported type " +
                         std::string(dtype_name(info->type)));
  }
  out.resize(size);
  kernels->dequantize_row(file.tensor_data(*info), out.data(), size);
  return Status::ok();
}

}  // namespace

Expected<std::unique_ptr<LlamaModel>> LlamaModel::load(const GgufFile& file,
                                                       const LoadProgress& progress) {
  Expected<ModelConfig> config = ModelConfig::from_gguf(file);
  if (!config) return config.status();
  std::unique_ptr<LlamaModel> model(new LlamaModel());
  model->config_ = *config;
  const ModelConfig& c = model->config_;
  const int64_t hidden = c.hidden_dim;

  Status s = load_matrix(file, "token_embd.weight", hidden, c.vocab_size, model->token_embedding_);
  if (!s) return s;
  if (!(s = load_matrix(file, "output.weight", hidden, c.vocab_size, model->output_, true))) return s;
  if (model->output_.empty()) model->output_ = model->token_embedding_;  // tied embeddings
  if (!(s = load_vector(file, "output_norm.weight", hidden, model->output_norm_))) return s;
  if (!(s = load_vector(file, "rope_freqs.weight", c.rope_dim / 2, model->rope_freq_factors_, true))) {
    return s;
  }

  model->layers_.resize(c.num_layers);
  for (int32_t i = 0; i < c.num_layers; ++i) {
    LayerWeights& layer = model->layers_[i];
    const std::string p = "blk." + std::to_string(i) + ".";
    for (const Status& step : {
             load_vector(file, p + "attn_norm.weight", hidden, layer.attn_norm),
             load_matrix(file, p + "attn_q.weight", hidden, c.q_dim(), layer.q),
             load_matrix(file, p + "attn_k.weight", hidden, c.kv_dim(), layer.k),
             load_matrix(file, p + "attn_v.weight", hidden, c.kv_dim(), layer.v),
             load_matrix(file, p + "attn_output.weight", c.q_dim(), hidden, layer.o),
             load_vector(file, p + "attn_q.bias", c.q_dim(), layer.q_bias, true),
             load_vector(file, p + "attn_k.bias", c.kv_dim(), layer.k_bias, true),
             load_vector(file, p + "attn_v.bias", c.kv_dim(), layer.v_bias, true),
             load_vector(file, p + "ffn_norm.weight", hidden, layer.ffn_norm),
             load_matrix(file, p + "ffn_gate.weight", hidden, c.ffn_dim, layer.gate),
             load_matrix(file, p + "ffn_up.weight", hidden, c.ffn_dim, layer.up),
             load_matrix(file, p + "ffn_down.weight", c.ffn_dim, hidden, layer.down)}) {
      if (!step) return step;
    }
  }

  // Fault every weight page in now, with progress, rather than during the first request.
  uint64_t total = 0;
  for (const GgufTensorInfo& info : file.tensors()) total += info.num_bytes;
  model->weight_bytes_ = total;
  uint64_t done = 0;
  volatile uint8_t sink = 0;
  for (const GgufTensorInfo& info : file.tensors()) {
    const uint8_t* data = file.tensor_data(info);
    uint8_t acc = 0;
    for (uint64_t off = 0; off < info.num_bytes; off += 4096) acc ^= data[off];
    sink = sink ^ acc;
    done += info.num_bytes;
    if (progress) progress(done, total);
  }
  return model;
}

KvCacheShape LlamaModel::kv_shape(int32_t num_blocks, int32_t block_size) const {
  return KvCacheShape{config_.num_layers, num_blocks, block_size, config_.num_kv_heads,
                      config_.head_dim};
}

void LlamaModel::attention_block(Backend& backend, const ForwardBatch& batch,
                                 KvCacheStorage& cache, int32_t layer_index) {
  const ModelConfig& c = config_;
  const LayerWeights& layer = layers_[layer_index];
  const int32_t n = batch.num_tokens();

  backend.rms_norm(x_.data(), layer.attn_norm.data(), normed_.data(), n, c.hidden_dim,
                   c.rms_norm_eps);
  backend.matmul(layer.q, normed_.data(), q_.data(), n);
  backend.matmul(layer.k, normed_.data(), k_.data(), n);
  backend.matmul(layer.v, normed_.data(), v_.data(), n);
  if (!layer.q_bias.empty()) backend.add_bias(q_.data(), layer.q_bias.data(), n, c.q_dim());
  if (!layer.k_bias.empty()) backend.add_bias(k_.data(), layer.k_bias.data(), n, c.kv_dim());
  if (!layer.v_bias.empty()) backend.add_bias(v_.data(), layer.v_bias.data(), n, c.kv_dim());

  RopeParams rope{c.rope_style, c.rope_dim, c.rope_freq_base, c.rope_position_scale,
                  rope_freq_factors_.empty() ? nullptr : rope_freq_factors_.data()};
  backend.rope(q_.data(), batch.positions, c.num_heads, c.head_dim, rope);
  backend.rope(k_.data(), batch.positions, c.num_kv_heads, c.head_dim, rope);

  const KvLayerView kv = cache.layer(layer_index);
  backend.write_kv(kv, k_.data(), v_.data(), batch.slot_mapping);
  AttentionBatch attention{q_.data(), attn_.data(), n, c.num_heads,
                           1.0f / std::sqrt(static_cast<float>(c.head_dim)), batch.sequences};
  backend.attention(attention, kv);

  backend.matmul(layer.o, attn_.data(), proj_.data(), n);
  backend.add(x_.data(), proj_.data(), static_cast<int64_t>(n) * c.hidden_dim);
}

void LlamaModel::mlp_block(Backend& backend, int32_t n, const LayerWeights& layer) {
  const ModelConfig& c = config_;
  backend.rms_norm(x_.data(), layer.ffn_norm.data(), normed_.data(), n, c.hidden_dim,
                   c.rms_norm_eps);
  backend.matmul(layer.gate, normed_.data(), gate_.data(), n);
  backend.matmul(layer.up, normed_.data(), up_.data(), n);
  backend.swiglu(gate_.data(), up_.data(), gate_.data(), static_cast<int64_t>(n) * c.ffn_dim);
  backend.matmul(layer.down, gate_.data(), proj_.data(), n);
  backend.add(x_.data(), proj_.data(), static_cast<int64_t>(n) * c.hidden_dim);
}

void LlamaModel::forward(Backend& backend, const ForwardBatch& batch, KvCacheStorage& cache,
                         float* logits) {
  const ModelConfig& c = config_;
  const int32_t n = batch.num_tokens();
  x_.resize(static_cast<size_t>(n) * c.hidden_dim);
  normed_.resize(x_.size());
  proj_.resize(x_.size());
  q_.resize(static_cast<size_t>(n) * c.q_dim());
  attn_.resize(q_.size());
  k_.resize(static_cast<size_t>(n) * c.kv_dim());
  v_.resize(k_.size());
  gate_.resize(static_cast<size_t>(n) * c.ffn_dim);
  up_.resize(gate_.size());

  backend.embed(token_embedding_, batch.tokens, x_.data());
  for (int32_t i = 0; i < c.num_layers; ++i) {
    attention_block(backend, batch, cache, i);
    mlp_block(backend, n, layers_[i]);
  }

  // Only the rows that need logits go through the final norm and the vocabulary projection.
  const int32_t m = static_cast<int32_t>(batch.logit_rows.size());
  for (int32_t r = 0; r < m; ++r) {
    const float* src = x_.data() + static_cast<size_t>(batch.logit_rows[r]) * c.hidden_dim;
    std::copy(src, src + c.hidden_dim, proj_.data() + static_cast<size_t>(r) * c.hidden_dim);
  }
  backend.rms_norm(proj_.data(), output_norm_.data(), normed_.data(), m, c.hidden_dim,
                   c.rms_norm_eps);
  backend.matmul(output_, normed_.data(), logits, m);
}

}  // namespace folio
