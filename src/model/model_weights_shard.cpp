// ModelWeights::shard: one tensor-parallel rank's slices of a loaded model.
#include <algorithm>
#include <cstring>
#include <string>

#include "model/model_weights.h"
#include "quant/formats.h"

namespace folio {
namespace {

// Rows stored in Hugging Face's Q / K order (WeightTensor::interleave_heads) are permuted within
// each head only, so a slice of whole heads is the same heads' stored rows, still interleaved.
WeightTensor row_slice(const WeightTensor& w, int64_t begin, int64_t count) {
  WeightTensor slice = w;
  slice.rows = count;
  slice.data = w.row(begin);
  slice.packed = nullptr;
  if (w.interleave_heads != 0) {
    const int64_t head_dim = w.rows / w.interleave_heads;
    slice.interleave_heads = static_cast<int32_t>(count / head_dim);
  }
  return slice;
}

// Columns [begin, begin + count) of every row, owned by `owned`.
Expected<WeightTensor> column_slice(const WeightTensor& w, int64_t begin, int64_t count,
                                    std::vector<std::vector<uint8_t>>& owned) {
  const DTypeInfo& info = dtype_info(w.type);
  WeightTensor slice{w.type, w.rows, count, nullptr};
  std::vector<uint8_t> bytes;
  slice.input_order = nullptr;
  if (begin % info.block_elems == 0 && count % info.block_elems == 0 && w.input_order == nullptr) {
    const size_t offset = row_bytes(w.type, begin), stride = row_bytes(w.type, count);
    bytes.resize(static_cast<size_t>(w.rows) * stride);
    for (int64_t r = 0; r < w.rows; ++r) {
      std::memcpy(bytes.data() + static_cast<size_t>(r) * stride, static_cast<const uint8_t*>(w.row(r)) + offset,
                  stride);
    }
    // Whole checkpoint groups stay whole groups (a g128 layer split at multiples of 128).
    if (w.group_cols > 0 && begin % w.group_cols == 0 && count % w.group_cols == 0) slice.group_cols = w.group_cols;
  } else {
    // The cut falls inside a block, or the columns are stored in act-order (a rank's inputs
    // scattered over the blocks): the slice is kept as F32 in input order (exact values, more
    // bytes).
    slice.type = DType::F32;
    bytes.resize(static_cast<size_t>(w.rows * count) * sizeof(float));
    std::vector<float> row(static_cast<size_t>(w.cols)), stored(row.size());
    for (int64_t r = 0; r < w.rows; ++r) {
      if (!quant::dequantize_row(w.type, w.row(r), w.input_order ? stored.data() : row.data(), w.cols)) {
        return Status::error("tensor parallel: cannot slice a " + std::string(dtype_name(w.type)) + " matrix");
      }
      if (w.input_order != nullptr) {
        for (int64_t c = 0; c < w.cols; ++c)
          row[static_cast<size_t>(w.input_order[c])] = stored[static_cast<size_t>(c)];
      }
      std::memcpy(bytes.data() + static_cast<size_t>(r * count) * sizeof(float), row.data() + begin,
                  static_cast<size_t>(count) * sizeof(float));
    }
  }
  slice.data = bytes.data();
  owned.push_back(std::move(bytes));
  return slice;
}

std::vector<float> vector_slice(const std::vector<float>& v, int64_t begin, int64_t count) {
  if (v.empty()) return {};
  return {v.begin() + begin, v.begin() + begin + count};
}

}  // namespace

int64_t ModelWeights::tensor_parallel_ffn_unit(int64_t minimum) const {
  int64_t unit = minimum;
  for (const LayerWeights& l : layers_) unit = std::max(unit, dtype_info(l.down.type).block_elems);
  return unit;
}

Expected<std::unique_ptr<ModelWeights>> ModelWeights::shard(const RankShard& rank) const {
  // Q and K may be stored in Hugging Face's order (a GPU session's views of the file): they are
  // sliced by whole heads. Every other matrix must be in computing order.
  for (const LayerWeights& w : layers_) {
    for (const WeightTensor* t : {&w.v, &w.o, &w.gate, &w.up, &w.down}) {
      if (t->interleave_heads != 0) return Status::error("tensor parallel: the weights are not in computing order");
    }
  }
  std::unique_ptr<ModelWeights> s(new ModelWeights());
  s->config_ = rank_config(config_, rank);
  s->architecture_ = architecture_;
  s->output_norm_ = output_norm_;
  s->rope_freq_factors_ = rope_freq_factors_;
  s->token_embedding_ = row_slice(token_embedding_, rank.vocab_begin, rank.vocab_count);
  s->output_ = row_slice(output_, rank.vocab_begin, rank.vocab_count);
  const int64_t d = config_.head_dim;
  const int64_t q0 = rank.head_begin * d, nq = rank.num_heads * d;
  const int64_t kv0 = rank.kv_head_begin * d, nkv = rank.num_kv_heads * d;
  s->layers_.reserve(layers_.size());
  for (const LayerWeights& w : layers_) {
    LayerWeights l = w;  // norms (and Gemma's per-head q/k norms) are every rank's
    l.q = row_slice(w.q, q0, nq);
    l.k = row_slice(w.k, kv0, nkv);
    l.v = row_slice(w.v, kv0, nkv);
    l.q_bias = vector_slice(w.q_bias, q0, nq);
    l.k_bias = vector_slice(w.k_bias, kv0, nkv);
    l.v_bias = vector_slice(w.v_bias, kv0, nkv);
    l.gate = row_slice(w.gate, rank.ffn_begin, rank.ffn_count);
    l.up = row_slice(w.up, rank.ffn_begin, rank.ffn_count);
    Expected<WeightTensor> o = column_slice(w.o, q0, nq, s->owned_);
    if (!o) return o.status();
    l.o = *o;
    Expected<WeightTensor> down = column_slice(w.down, rank.ffn_begin, rank.ffn_count, s->owned_);
    if (!down) return down.status();
    l.down = *down;
    s->layers_.push_back(std::move(l));
  }
  for (const LayerWeights& l : s->layers_) {
    for (const WeightTensor* w : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) {
      s->weight_bytes_ += static_cast<uint64_t>(w->rows) * w->row_stride_bytes();
    }
  }
  s->weight_bytes_ += static_cast<uint64_t>(s->output_.rows) * s->output_.row_stride_bytes();
  return s;
}

}  // namespace folio
