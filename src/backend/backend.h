// The Backend interface: the handful of ops a transformer forward pass is made of, on host
// memory. The CPU executor runs the transformer recipe (model/transformer_recipe.h) through these
// ops; the CPU backend (backend/cpu) is the reference implementation every CUDA kernel is checked
// against. Buffers are plain float arrays in the backend's
// memory; shapes are in the comments, rows contiguous.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "backend/attention_batch.h"
#include "model/rope.h"
#include "model/weight_tensor.h"

namespace folio {

struct RopeParams {
  RopeStyle style = RopeStyle::kAdjacentPairs;
  int32_t rotary_dim = 0;  // leading dims of each head that rotate (usually head_dim)
  float freq_base = 10000.0f;
  float position_scale = 1.0f;          // linear rope scaling: positions multiplied by this
  const float* freq_factors = nullptr;  // (rotary_dim / 2,) Llama-3 style divisors, or null
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // out[t] = dequantized row tokens[t] of table.  out: (tokens.size(), table.cols)
  virtual void embed(const WeightTensor& table, std::span<const int32_t> tokens, float* out) = 0;

  // out = x / rms(x) * weight, row by row.  x, out: (rows, dim); weight: (dim,)
  virtual void rms_norm(const float* x, const float* weight, float* out, int64_t rows, int64_t dim, float eps) = 0;

  // y = x W^T.  x: (n, w.cols); y: (n, w.rows)
  virtual void matmul(const WeightTensor& w, const float* x, float* y, int64_t n) = 0;

  // ys[i] = x ws[i]^T for matrices reading the same input (Q, K and V; gate and up): where a
  // backend can, one conversion of x and one parallel loop instead of one each.
  virtual void matmul_shared_input(std::span<const WeightTensor* const> ws, const float* x, std::span<float* const> ys,
                                   int64_t n) {
    for (size_t i = 0; i < ws.size(); ++i) matmul(*ws[i], x, ys[i], n);
  }

  // x[r] += bias for every row.  x: (rows, dim); bias: (dim,)
  virtual void add_bias(float* x, const float* bias, int64_t rows, int64_t dim) = 0;

  // Rotates each head of x in place by its token's position.  x: (n, num_heads, head_dim)
  virtual void rope(float* x, std::span<const int32_t> positions, int32_t num_heads, int32_t head_dim,
                    const RopeParams& params) = 0;

  // Stores K and V of each token in the cache's format at the slot slot_mapping[t] names (a
  // staging slot with a residual format: fp16 there). k, v: (n, num_kv_heads, head_dim).
  virtual void write_kv(const KvLayerView& cache, const float* k, const float* v,
                        std::span<const int32_t> slot_mapping) = 0;

  // Residual formats: quantizes each sealed block from its staging block (after write_kv).
  virtual void seal_kv(const KvLayerView& cache, std::span<const KvSeal> seals) = 0;

  // Causal attention of every query token over its sequence's cached K/V.
  virtual void attention(const AttentionBatch& batch, const KvLayerView& cache) = 0;

  // out = silu(gate) * up.  all (n,)
  virtual void swiglu(const float* gate, const float* up, float* out, int64_t n) = 0;

  // out = silu(x gate^T) * (x up^T): the MLP's two projections and SwiGLU as one step, which a
  // backend may fuse (never writing the two products). up_scratch: (n, up.rows) floats a
  // backend that does not fuse may use. x: (n, cols); out: (n, gate.rows)
  virtual void matmul_swiglu(const WeightTensor& gate, const WeightTensor& up, const float* x, float* out,
                             float* up_scratch, int64_t n) {
    const WeightTensor* ws[2] = {&gate, &up};
    float* ys[2] = {out, up_scratch};
    matmul_shared_input(ws, x, ys, n);
    swiglu(out, up_scratch, out, n * gate.rows);
  }

  // out = gelu(gate) * up with GELU's tanh approximation (Gemma).  all (n,)
  virtual void geglu_tanh(const float* gate, const float* up, float* out, int64_t n) = 0;

  // x *= factor.  (n,)
  virtual void scale(float* x, float factor, int64_t n) = 0;

  // x += y.  both (n,)
  virtual void add(float* x, const float* y, int64_t n) = 0;
};

}  // namespace folio
