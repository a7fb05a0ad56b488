// A model's layers one at a time over prompts whose residual streams the caller keeps: what
// calibrating a quantizer layer by layer needs (cli/quantize_int4.cpp). Layer l's input
// statistics come from the residual streams the layers before it left (their quantized values,
// where the caller swapped those in: GPTQ's sequential order), and only that layer's Gram
// matrices are held, so the model's size no longer bounds the calibration.
//
// Each prompt is one causal sequence at positions 0..n-1, its own K/V written and read within
// the layer's pass (no engine, no block manager: blocks 0..n/block_size of this runner's cache).
// The layer is computed by the recipe the executors run (model/transformer_recipe.h) on the
// CPU's device, so a prompt taken through every layer and the head gives the executor's logits.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/activation_stats.h"
#include "backend/cpu/cpu_forward.h"
#include "executor/forward_batch.h"
#include "kv/kv_cache_storage.h"
#include "model/model_weights.h"

namespace folio::cpu {

class LayerRunner {
 public:
  // Prompts of up to max_tokens tokens. The weights and the backend must outlive the runner.
  LayerRunner(const ModelWeights& weights, Backend& backend, int32_t max_tokens);

  // x = the embedding of the prompt's tokens, (n, hidden).
  void embed(std::span<const int32_t> tokens, std::vector<float>& x);
  // x (n, hidden): from layer l's input to its output; stats (null: none) gets the layer's
  // matrix inputs.
  void run_layer(int32_t layer, std::vector<float>& x, ActivationStats* stats);
  // The head on every row of x: logits (n, vocab).
  std::vector<float> logits(const std::vector<float>& x);

 private:
  // The batch of one n-token prompt at positions 0..n-1 in blocks 0, 1, ...
  const ForwardBatch& batch_of(int32_t n, std::span<const int32_t> tokens = {});

  const ModelWeights& weights_;
  Backend& backend_;
  int32_t max_tokens_;
  KvCacheStorage cache_;
  ForwardBatch batch_;
  std::vector<int32_t> block_table_;
  CpuActivations activations_;
  std::vector<float> logits_;
};

}  // namespace folio::cpu
