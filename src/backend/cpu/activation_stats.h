// What an importance matrix is made of: for each layer and each matrix input, the sum over the
// tokens of a calibration text of x_i^2 per input feature i. A weight column that meets large
// activations matters more to the layer's output, so the quantizer spends its error elsewhere
// (quant/quantize_search.h). The CPU forward adds to it when one is attached to its executor.
// With gram, the whole Gram matrix sum x x^T of each input too (GPTQ's H, quant/gptq.h): width^2
// doubles per layer and input, 800 MB for the default model's 30 layers.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_config.h"

namespace folio::cpu {

enum class MatrixInput : uint8_t {
  kAttention,        // attn_norm's output: what Q, K and V multiply
  kAttentionOutput,  // the attention's output: what O multiplies
  kFfn,              // ffn_norm's output: gate and up
  kFfnHidden,        // SwiGLU's output: down
};

class ActivationStats {
 public:
  // Statistics of layers [first_layer, first_layer + num_layers) (num_layers < 0: to the last);
  // others' inputs are not kept (calibration layer by layer holds one layer's Gram matrices).
  // keep_inputs: every row added is kept too (AWQ's scale search reads the inputs themselves
  // where there are fewer tokens than features: quant/awq.h).
  explicit ActivationStats(const ModelConfig& config, bool gram = false, int32_t first_layer = 0,
                           int32_t num_layers = -1, bool keep_inputs = false);

  // Rows x (n, width of the input) of one layer's input (nothing for a layer not kept).
  void add(MatrixInput input, int32_t layer, const float* x, int32_t n);
  // Mean x_i^2 over the tokens seen (tokens() of them), per input feature; empty before any
  // (and for a layer not kept).
  std::vector<float> mean_squares(MatrixInput input, int32_t layer) const;
  int64_t tokens(MatrixInput input, int32_t layer) const;
  // sum x x^T, (width, width) row-major with the lower triangle filled; empty without gram.
  const std::vector<double>& gram(MatrixInput input, int32_t layer) const { return site(input, layer).gram; }
  // The rows added, (tokens, width) row-major; empty without keep_inputs.
  const std::vector<float>& inputs(MatrixInput input, int32_t layer) const { return site(input, layer).inputs; }

 private:
  struct Site {
    std::vector<double> sums;
    int64_t tokens = 0;
    std::vector<double> gram;
    std::vector<float> inputs;
  };
  bool keep_inputs_ = false;
  const Site& site(MatrixInput input, int32_t layer) const;
  int32_t first_layer_ = 0, end_layer_ = 0;
  std::vector<Site> sites_;  // (layer - first_layer_, input)
};

}  // namespace folio::cpu
