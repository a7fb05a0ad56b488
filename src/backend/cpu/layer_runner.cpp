#include "backend/cpu/layer_runner.h"

#include <cassert>

#include "executor/kv_pool_sizing.h"
#include "model/transformer_recipe.h"

namespace folio::cpu {
namespace {

constexpr int32_t kBlockSize = 16;

}  // namespace

// One block-table group with a slot per layer (release_window_blocks off): sliding-window
// layers mask by position, as with a single sequence in the executors.
LayerRunner::LayerRunner(const ModelWeights& weights, Backend& backend, int32_t max_tokens)
    : weights_(weights),
      backend_(backend),
      max_tokens_(max_tokens),
      cache_(kv_cache_shape(weights.config(), (max_tokens + kBlockSize - 1) / kBlockSize, kBlockSize, KvFormat::kFp16,
                            0, /*release_window_blocks=*/false)) {
  block_table_.resize(static_cast<size_t>((max_tokens + kBlockSize - 1) / kBlockSize));
  for (size_t b = 0; b < block_table_.size(); ++b) block_table_[b] = static_cast<int32_t>(b);
}

const ForwardBatch& LayerRunner::batch_of(int32_t n, std::span<const int32_t> tokens) {
  assert(n > 0 && n <= max_tokens_);
  batch_.clear();
  batch_.tokens.assign(static_cast<size_t>(n), 0);
  if (!tokens.empty()) batch_.tokens.assign(tokens.begin(), tokens.end());
  for (int32_t t = 0; t < n; ++t) {
    batch_.positions.push_back(t);
    batch_.slot_mapping.push_back(t);  // block t / 16 is block_table_[t / 16] = t / 16
  }
  AttentionSequence s;
  s.query_len = n;
  s.context_len = n;
  s.block_table = std::span<const int32_t>(block_table_.data(), static_cast<size_t>((n + kBlockSize - 1) / kBlockSize));
  s.first_staged_block = static_cast<int32_t>(s.block_table.size());
  batch_.sequences.push_back(s);
  return batch_;
}

void LayerRunner::embed(std::span<const int32_t> tokens, std::vector<float>& x) {
  CpuForward forward(weights_, backend_, cache_, batch_of(static_cast<int32_t>(tokens.size()), tokens), activations_,
                     nullptr);
  forward.embed();
  const size_t size = tokens.size() * static_cast<size_t>(weights_.config().hidden_dim);
  x.assign(activations_.x.begin(), activations_.x.begin() + static_cast<std::ptrdiff_t>(size));
}

void LayerRunner::run_layer(int32_t layer, std::vector<float>& x, ActivationStats* stats) {
  const auto n = static_cast<int32_t>(x.size() / static_cast<size_t>(weights_.config().hidden_dim));
  CpuForward forward(weights_, backend_, cache_, batch_of(n), activations_, nullptr, stats);
  std::copy(x.begin(), x.end(), activations_.x.begin());
  run_transformer_layer(weights_.architecture(), forward, layer);
  std::copy(activations_.x.begin(), activations_.x.begin() + static_cast<std::ptrdiff_t>(x.size()), x.begin());
}

std::vector<float> LayerRunner::logits(const std::vector<float>& x) {
  const ModelConfig& c = weights_.config();
  const auto n = static_cast<int32_t>(x.size() / static_cast<size_t>(c.hidden_dim));
  batch_of(n);
  for (int32_t t = 0; t < n; ++t) batch_.logit_rows.push_back(t);
  logits_.resize(static_cast<size_t>(n) * static_cast<size_t>(c.vocab_size));
  CpuForward forward(weights_, backend_, cache_, batch_, activations_, logits_.data());
  std::copy(x.begin(), x.end(), activations_.x.begin());
  run_transformer_head(forward, 0, n);
  return logits_;
}

}  // namespace folio::cpu
