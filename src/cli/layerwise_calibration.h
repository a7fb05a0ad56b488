// The calibration text of `folio quantize --type gptq | awq`, run through the model one layer
// at a time (backend/cpu/layer_runner.h): each chunk's residual stream is kept between layers,
// so only one layer's statistics (its four inputs' Gram matrices) are ever held, and the
// layers after a quantized one see what the quantized one computes (GPTQ's sequential order).
// A model whose Gram matrices, all layers together, would not fit (an 8B model's: ~65 GB)
// calibrates in one layer's worth (~2 GB). Compute: one pass of the model for AWQ (the next
// layer reads the float layer's outputs), two for GPTQ (each layer once for its statistics,
// once more quantized for the next layer's inputs).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/activation_stats.h"
#include "backend/cpu/layer_runner.h"
#include "cli/model_session.h"
#include "core/status.h"

namespace folio::cli {

class LayerwiseCalibration {
 public:
  // The model directory on the CPU, and the first `tokens` tokens of the text as chunks of 512
  // (each starting with BOS where the model adds one, as the importance matrix's pass does).
  static Expected<std::unique_ptr<LayerwiseCalibration>> open(const std::string& model_dir,
                                                              const std::string& text_path, int32_t tokens, int threads,
                                                              bool quiet);

  const ModelWeights& weights() const { return *session_.weights; }
  int32_t num_layers() const { return weights().config().num_layers; }
  int32_t num_chunks() const { return static_cast<int32_t>(chunks_.size()); }

  // Layer `layer`'s input statistics, with Gram matrices, over every chunk. Layers go in order:
  // collect(l), then advance(l), then collect(l + 1).
  // keep_inputs: the inputs themselves too (cpu::ActivationStats::inputs).
  std::unique_ptr<cpu::ActivationStats> collect(int32_t layer, bool keep_inputs = false);
  // Every chunk's residual stream through layer `layer`, computed with `replacement` swapped in
  // for the model's layer (null: the model's own).
  void advance(int32_t layer, LayerWeights* replacement);

 private:
  LayerwiseCalibration() = default;

  ModelSession session_;
  std::unique_ptr<cpu::LayerRunner> runner_;
  std::vector<std::vector<float>> chunks_;   // each chunk's residual stream, (512, hidden)
  std::vector<std::vector<float>> outputs_;  // the float layer's outputs, from collect()
  int32_t next_layer_ = 0;                   // the layer the residual streams are the input of
};

}  // namespace folio::cli
