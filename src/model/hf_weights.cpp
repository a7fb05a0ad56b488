// ModelWeights from a Hugging Face directory (model.safetensors or shards): the tensors named as
// transformers names them, shapes checked against config.json.
#include <algorithm>
#include <cstring>
#include <set>
#include <string>

#include "core/fp16.h"
#include "model/hf_checkpoint.h"
#include "model/hf_config.h"
#include "model/hf_fp8.h"
#include "model/hf_quantization.h"
#include "model/model_weights.h"

namespace folio {
namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::optional<DType> weight_dtype(SafetensorsDtype d) {
  switch (d) {
    case SafetensorsDtype::kF32: return DType::F32;
    case SafetensorsDtype::kF16: return DType::F16;
    case SafetensorsDtype::kBF16: return DType::BF16;
    default: return std::nullopt;
  }
}

struct Loader {
  const HfCheckpoint& checkpoint;
  const HfQuantization& quantization;
  std::vector<std::vector<uint8_t>>& owned;

  Expected<HfCheckpoint::Entry> find(const std::string& name, const std::vector<int64_t>& shape) const {
    const HfCheckpoint::Entry e = checkpoint.find(name);
    if (e.tensor == nullptr) return Status::error("model: tensor '" + name + "' is missing from " + checkpoint.dir());
    if (e.tensor->shape != shape) {
      return Status::error("model: tensor '" + name + "' in " + e.file->path() + " has shape " +
                           shape_string(e.tensor->shape) + ", config.json implies " + shape_string(shape));
    }
    if (!weight_dtype(e.tensor->dtype)) {
      return Status::error("model: tensor '" + name + "' in " + e.file->path() + " has dtype " +
                           std::string(safetensors_dtype_name(e.tensor->dtype)) +
                           "; folio computes with F32, F16 and BF16 safetensors");
    }
    return e;
  }

  // Layer `prefix` (its ".weight", or an AWQ / GPTQ layer's packed tensors, repacked in
  // computing order). heads > 0: Q / K rows stored in Hugging Face's order
  // (WeightTensor::interleave_heads).
  Status matrix(const std::string& prefix, int64_t rows, int64_t cols, WeightTensor& out, int32_t heads = 0) const {
    if (hf_layer_is_fp8(checkpoint, prefix)) {
      Expected<WeightTensor> w =
          load_hf_fp8_layer(checkpoint, prefix, rows, cols, heads, quantization.block_size, owned);
      if (!w) return w.status();
      out = *w;
      return Status::ok();
    }
    if (quantization.method != HfQuantization::Method::kNone && hf_layer_is_quantized(checkpoint, prefix)) {
      Expected<WeightTensor> w = load_hf_quantized_layer(checkpoint, quantization, prefix, rows, cols, heads, owned);
      if (!w) return w.status();
      out = *w;
      return Status::ok();
    }
    Expected<HfCheckpoint::Entry> e = find(prefix + ".weight", {rows, cols});
    if (!e) return e.status();
    out = WeightTensor{*weight_dtype(e->tensor->dtype), rows, cols, e->file->data(*e->tensor).data()};
    out.interleave_heads = heads;
    return Status::ok();
  }

  Status vector(const std::string& name, int64_t size, std::vector<float>& out) const {
    Expected<HfCheckpoint::Entry> e = find(name, {size});
    if (!e) return e.status();
    out = hf_tensor_floats(*e);  // find() admits only F32 / F16 / BF16
    return Status::ok();
  }
};

// llama.cpp's converter stores Q and K of Llama-layout models with each head's two halves
// interleaved (WeightTensor::interleave_heads), which is what lets RoPE rotate adjacent pairs.
// The same reordering of rows here makes a directory compute exactly what its GGUF computes.
std::vector<uint8_t> rows_in_computing_order(const WeightTensor& w) {
  const size_t row_bytes = w.row_stride_bytes();
  std::vector<uint8_t> out(static_cast<size_t>(w.rows) * row_bytes);
  for (int64_t r = 0; r < w.rows; ++r) std::memcpy(out.data() + r * row_bytes, w.row(w.stored_row(r)), row_bytes);
  return out;
}

std::vector<float> interleave_head_halves(const std::vector<float>& bias, int32_t num_heads) {
  std::vector<float> out(bias.size());
  const size_t head_dim = bias.size() / static_cast<size_t>(num_heads);
  const size_t half = head_dim / 2;
  for (size_t h = 0; h < static_cast<size_t>(num_heads); ++h) {
    for (size_t i = 0; i < half; ++i) {
      for (size_t j = 0; j < 2; ++j) out[h * head_dim + 2 * i + j] = bias[h * head_dim + j * half + i];
    }
  }
  return out;
}

// Matrices that read one input (Q, K, V; gate, up) with equal act-order column orders point at
// one of them, so that a matmul over them gathers the input once (WeightTensor::input_order).
// GPTQ quantizes them from one Hessian, so their orders are equal unless ties broke apart.
void share_input_order(std::initializer_list<WeightTensor*> ws, int64_t cols) {
  const WeightTensor* first = *ws.begin();
  for (WeightTensor* w : ws) {
    if (w->input_order == nullptr || first->input_order == nullptr) continue;
    if (std::equal(w->input_order, w->input_order + cols, first->input_order)) w->input_order = first->input_order;
  }
}

// Gemma's RMS norms multiply by (1 + weight) and store the weight; the recipe multiplies by
// what it is given (GGUF files store the sum), so the one is added here, in float32 as
// transformers adds it.
void add_one(std::vector<float>& norm) {
  for (float& w : norm) w += 1.0f;
}

// Gemma 3's layer tensors: norms on both sides of attention and of the MLP, q and k normed per
// head (every norm stored as Gemma stores it, see add_one).
Status load_gemma3_layer(const Loader& load, const ModelConfig& c, const std::string& p, LayerWeights& layer) {
  const int64_t hidden = c.hidden_dim;
  for (const Status& step : {load.vector(p + "input_layernorm.weight", hidden, layer.attn_norm),
                             load.matrix(p + "self_attn.q_proj", c.q_dim(), hidden, layer.q),
                             load.matrix(p + "self_attn.k_proj", c.kv_dim(), hidden, layer.k),
                             load.matrix(p + "self_attn.v_proj", c.kv_dim(), hidden, layer.v),
                             load.matrix(p + "self_attn.o_proj", hidden, c.q_dim(), layer.o),
                             load.vector(p + "self_attn.q_norm.weight", c.head_dim, layer.q_norm),
                             load.vector(p + "self_attn.k_norm.weight", c.head_dim, layer.k_norm),
                             load.vector(p + "post_attention_layernorm.weight", hidden, layer.post_attn_norm),
                             load.vector(p + "pre_feedforward_layernorm.weight", hidden, layer.ffn_norm),
                             load.vector(p + "post_feedforward_layernorm.weight", hidden, layer.post_ffn_norm),
                             load.matrix(p + "mlp.gate_proj", c.ffn_dim, hidden, layer.gate),
                             load.matrix(p + "mlp.up_proj", c.ffn_dim, hidden, layer.up),
                             load.matrix(p + "mlp.down_proj", hidden, c.ffn_dim, layer.down)}) {
    if (!step) return step;
  }
  share_input_order({&layer.q, &layer.k, &layer.v}, hidden);
  share_input_order({&layer.gate, &layer.up}, hidden);
  for (std::vector<float>* norm :
       {&layer.attn_norm, &layer.q_norm, &layer.k_norm, &layer.post_attn_norm, &layer.ffn_norm, &layer.post_ffn_norm}) {
    add_one(*norm);
  }
  return Status::ok();
}

}  // namespace

Expected<std::unique_ptr<ModelWeights>> ModelWeights::load_hf(const HfCheckpoint& checkpoint, const HfModelConfig& hf,
                                                              const HfLoadOptions& options,
                                                              const LoadProgress& progress) {
  std::unique_ptr<ModelWeights> model(new ModelWeights());
  model->config_ = hf.config;
  Expected<Architecture> architecture = describe_architecture(hf.config);
  if (!architecture) return architecture.status();
  model->architecture_ = std::move(architecture).value();
  const ModelConfig& c = model->config_;
  const int64_t hidden = c.hidden_dim;
  const Loader load{checkpoint, hf.quantization, model->owned_};
  const bool interleave = c.rope_style == RopeStyle::kAdjacentPairs;

  if (Status s = load.matrix("model.embed_tokens", c.vocab_size, hidden, model->token_embedding_); !s) return s;
  const bool has_head = checkpoint.find("lm_head.weight").tensor != nullptr ||
                        (hf.quantization.method != HfQuantization::Method::kNone &&
                         hf_layer_is_quantized(checkpoint, "lm_head"));  // GPTQModel's lm_head: true
  if (hf.tie_word_embeddings || !has_head) {
    model->output_ = model->token_embedding_;
  } else if (Status s = load.matrix("lm_head", c.vocab_size, hidden, model->output_); !s) {
    return s;
  }
  if (Status s = load.vector("model.norm.weight", hidden, model->output_norm_); !s) return s;
  model->rope_freq_factors_ = hf.rope_freq_factors;
  const bool gemma = c.architecture == "gemma3";
  if (gemma) add_one(model->output_norm_);

  model->layers_.resize(static_cast<size_t>(c.num_layers));
  for (int32_t i = 0; i < c.num_layers; ++i) {
    LayerWeights& layer = model->layers_[static_cast<size_t>(i)];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    if (gemma) {
      if (Status s = load_gemma3_layer(load, c, p, layer); !s) return s;
      continue;
    }
    for (const Status& step :
         {load.vector(p + "input_layernorm.weight", hidden, layer.attn_norm),
          load.matrix(p + "self_attn.q_proj", c.q_dim(), hidden, layer.q, interleave ? c.num_heads : 0),
          load.matrix(p + "self_attn.k_proj", c.kv_dim(), hidden, layer.k, interleave ? c.num_kv_heads : 0),
          load.matrix(p + "self_attn.v_proj", c.kv_dim(), hidden, layer.v),
          load.matrix(p + "self_attn.o_proj", hidden, c.q_dim(), layer.o),
          load.vector(p + "post_attention_layernorm.weight", hidden, layer.ffn_norm),
          load.matrix(p + "mlp.gate_proj", c.ffn_dim, hidden, layer.gate),
          load.matrix(p + "mlp.up_proj", c.ffn_dim, hidden, layer.up),
          load.matrix(p + "mlp.down_proj", hidden, c.ffn_dim, layer.down)}) {
      if (!step) return step;
    }
    share_input_order({&layer.q, &layer.k, &layer.v}, hidden);
    share_input_order({&layer.gate, &layer.up}, hidden);
    if (hf.attention_bias) {
      for (const Status& step : {load.vector(p + "self_attn.q_proj.bias", c.q_dim(), layer.q_bias),
                                 load.vector(p + "self_attn.k_proj.bias", c.kv_dim(), layer.k_bias),
                                 load.vector(p + "self_attn.v_proj.bias", c.kv_dim(), layer.v_bias)}) {
        if (!step) return step;
      }
      if (checkpoint.find(p + "self_attn.o_proj.bias").tensor != nullptr) {
        return Status::error("model: tensor '" + p +
                             "self_attn.o_proj.bias': an output projection bias is not supported");
      }
    }
    if (interleave) {
      if (options.for_cpu) {
        for (WeightTensor* w : {&layer.q, &layer.k}) {
          if (w->interleave_heads == 0) continue;  // repacked from AWQ / GPTQ in computing order
          model->owned_.push_back(rows_in_computing_order(*w));
          w->data = model->owned_.back().data();
          w->interleave_heads = 0;
        }
      }
      // Biases are small and the same on every device: always in computing order.
      if (!layer.q_bias.empty()) layer.q_bias = interleave_head_halves(layer.q_bias, c.num_heads);
      if (!layer.k_bias.empty()) layer.k_bias = interleave_head_halves(layer.k_bias, c.num_kv_heads);
    }
  }

  model->weight_bytes_ = checkpoint.total_bytes();
  if (!options.for_cpu) return model;  // the upload reads each tensor once, in order
  // Fault every weight page the CPU will read in now, with progress, rather than during the
  // first request (the stored Q / K rows were copied and are not read again).
  std::set<const void*> copied;
  if (interleave) {
    for (int32_t i = 0; i < c.num_layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".self_attn.";
      for (const char* name : {"q_proj.weight", "k_proj.weight"}) copied.insert(checkpoint.find(p + name).tensor);
    }
  }
  uint64_t done = 0;
  volatile uint8_t sink = 0;
  for (const std::string& name : checkpoint.tensor_names()) {
    const HfCheckpoint::Entry e = checkpoint.find(name);
    const std::span<const uint8_t> data = e.file->data(*e.tensor);
    if (!copied.contains(e.tensor)) {
      uint8_t acc = 0;
      for (uint64_t off = 0; off < data.size(); off += 4096) acc ^= data[off];
      sink = sink ^ acc;
    }
    done += data.size();
    if (progress) progress(done, model->weight_bytes_);
  }
  return model;
}

}  // namespace folio
