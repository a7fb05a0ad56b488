#include "cli/layerwise_calibration.h"

#include <cassert>
#include <optional>

#include "cli/calibration_text.h"

namespace folio::cli {

Expected<std::unique_ptr<LayerwiseCalibration>> LayerwiseCalibration::open(const std::string& model_dir,
                                                                           const std::string& text_path, int32_t tokens,
                                                                           int threads, bool quiet) {
  constexpr int32_t kChunk = kCalibrationChunk;
  Expected<CalibrationText> text = read_calibration_text(text_path);
  if (!text) return text.status();
  std::unique_ptr<LayerwiseCalibration> c(new LayerwiseCalibration());
  Expected<ModelSession> session = open_model_session(model_dir, threads, quiet, "cpu");
  if (!session) return session.status();
  c->session_ = std::move(session).value();
  const Tokenizer& tokenizer = *c->session_.tokenizer;
  Expected<std::vector<int32_t>> ids = calibration_tokens(*text, tokenizer, tokens, "--calibration-tokens");
  if (!ids) return ids.status();
  if (tokens < kChunk) {
    return Status::error("the calibration needs at least one whole chunk of " + std::to_string(kChunk) + " tokens");
  }
  const std::optional<int32_t> bos = chunk_bos(tokenizer);
  c->runner_ = std::make_unique<cpu::LayerRunner>(*c->session_.weights, *c->session_.backend, kChunk);
  for (int32_t at = 0; at + kChunk <= tokens; at += kChunk) {
    std::vector<int32_t> window(ids->begin() + at, ids->begin() + at + kChunk);
    if (bos) window[0] = *bos;
    c->chunks_.emplace_back();
    c->runner_->embed(window, c->chunks_.back());
  }
  return c;
}

std::unique_ptr<cpu::ActivationStats> LayerwiseCalibration::collect(int32_t layer, bool keep_inputs) {
  assert(layer == next_layer_);
  auto stats = std::make_unique<cpu::ActivationStats>(weights().config(), /*gram=*/true, layer, 1, keep_inputs);
  // The float layer's outputs are kept for advance() without a replacement (AWQ's order).
  outputs_.resize(chunks_.size());
  for (size_t i = 0; i < chunks_.size(); ++i) {
    outputs_[i] = chunks_[i];
    runner_->run_layer(layer, outputs_[i], stats.get());
  }
  return stats;
}

void LayerwiseCalibration::advance(int32_t layer, LayerWeights* replacement) {
  assert(layer == next_layer_);
  if (replacement == nullptr && outputs_.size() == chunks_.size()) {
    chunks_.swap(outputs_);
  } else {
    if (replacement != nullptr) session_.weights->swap_layer(layer, *replacement);
    for (std::vector<float>& chunk : chunks_) runner_->run_layer(layer, chunk, nullptr);
    if (replacement != nullptr) session_.weights->swap_layer(layer, *replacement);
  }
  outputs_.clear();
  ++next_layer_;
}

}  // namespace folio::cli
