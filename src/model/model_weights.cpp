#include "model/model_weights.h"

#include <cmath>
#include <string>

#include "quant/formats.h"

namespace folio {
namespace {

std::string shape_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// Finds a 2-D weight of GGUF shape [cols, rows] in a computable type.
Status load_matrix(const GgufFile& file, const std::string& name, int64_t cols, int64_t rows, WeightTensor& out,
                   bool optional = false) {
  const GgufTensorInfo* info = file.find_tensor(name);
  if (info == nullptr) {
    return optional ? Status::ok() : Status::error("model: tensor '" + name + "' is missing");
  }
  if (info->dims.size() != 2 || info->dims[0] != cols || info->dims[1] != rows) {
    return Status::error("model: tensor '" + name + "' has shape " + shape_string(info->dims) + ", expected [" +
                         std::to_string(cols) + ", " + std::to_string(rows) + "]");
  }
  if (!quant::is_weight_format(info->type)) {
    return Status::error("model: tensor '" + name + "' has type " + std::string(dtype_name(info->type)) +
                         ", which folio cannot compute with");
  }
  out = WeightTensor{info->type, rows, cols, file.tensor_data(*info)};
  return Status::ok();
}

// Small vectors (norms, biases, rope factors) are converted to float and owned.
Status load_vector(const GgufFile& file, const std::string& name, int64_t size, std::vector<float>& out,
                   bool optional = false) {
  const GgufTensorInfo* info = file.find_tensor(name);
  if (info == nullptr) {
    return optional ? Status::ok() : Status::error("model: tensor '" + name + "' is missing");
  }
  if (info->num_elements != static_cast<uint64_t>(size)) {
    return Status::error("model: tensor '" + name + "' has shape " + shape_string(info->dims) + ", expected " +
                         std::to_string(size) + " elements");
  }
  const quant::DequantizeRowFn dequantize = quant::dequantizer(info->type);
  if (!quant::is_weight_format(info->type) || size % dtype_info(info->type).block_elems != 0) {
    return Status::error("model: tensor '" + name + "' has unsupported type " + std::string(dtype_name(info->type)));
  }
  out.resize(size);
  dequantize(file.tensor_data(*info), out.data(), size);
  return Status::ok();
}

}  // namespace

Expected<std::unique_ptr<ModelWeights>> ModelWeights::load(const GgufFile& file, const LoadProgress& progress) {
  Expected<ModelConfig> config = ModelConfig::from_gguf(file);
  if (!config) return config.status();
  std::unique_ptr<ModelWeights> model(new ModelWeights());
  model->config_ = *config;
  Expected<Architecture> architecture = describe_architecture(*config);
  if (!architecture) return architecture.status();
  model->architecture_ = std::move(architecture).value();
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
    for (const Status& step : {load_vector(file, p + "attn_norm.weight", hidden, layer.attn_norm),
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
    const Architecture& arch = model->architecture_;
    if (arch.qk_norm) {
      if (!(s = load_vector(file, p + "attn_q_norm.weight", c.head_dim, layer.q_norm))) return s;
      if (!(s = load_vector(file, p + "attn_k_norm.weight", c.head_dim, layer.k_norm))) return s;
    }
    if (arch.post_norms) {
      if (!(s = load_vector(file, p + "post_attention_norm.weight", hidden, layer.post_attn_norm))) return s;
      if (!(s = load_vector(file, p + "post_ffw_norm.weight", hidden, layer.post_ffn_norm))) return s;
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

}  // namespace folio

namespace folio {

bool ModelWeights::in_computing_order() const {
  for (const LayerWeights& l : layers_) {
    for (const WeightTensor* w : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) {
      if (w->interleave_heads != 0) return false;
    }
  }
  return true;
}

}  // namespace folio
