#include "backend/cpu/activation_stats.h"

#include <algorithm>

#include "quant/dense_blas.h"

namespace folio::cpu {

ActivationStats::ActivationStats(const ModelConfig& c, bool gram, int32_t first_layer, int32_t num_layers,
                                 bool keep_inputs)
    : keep_inputs_(keep_inputs),
      first_layer_(first_layer),
      end_layer_(num_layers < 0 ? c.num_layers : std::min(c.num_layers, first_layer + num_layers)) {
  for (int32_t l = first_layer_; l < end_layer_; ++l) {
    for (int64_t width : {static_cast<int64_t>(c.hidden_dim), static_cast<int64_t>(c.q_dim()),
                          static_cast<int64_t>(c.hidden_dim), static_cast<int64_t>(c.ffn_dim)}) {
      sites_.push_back(Site{std::vector<double>(static_cast<size_t>(width), 0.0),
                            0,
                            std::vector<double>(gram ? static_cast<size_t>(width * width) : 0, 0.0),
                            {}});
    }
  }
}

const ActivationStats::Site& ActivationStats::site(MatrixInput input, int32_t layer) const {
  static const Site kNotKept;
  if (layer < first_layer_ || layer >= end_layer_) return kNotKept;
  return sites_[static_cast<size_t>(layer - first_layer_) * 4 + static_cast<size_t>(input)];
}

void ActivationStats::add(MatrixInput input, int32_t layer, const float* x, int32_t n) {
  if (layer < first_layer_ || layer >= end_layer_) return;
  Site& s = const_cast<Site&>(site(input, layer));
  const size_t width = s.sums.size();
  for (int32_t r = 0; r < n; ++r) {
    const float* row = x + static_cast<size_t>(r) * width;
    for (size_t i = 0; i < width; ++i) s.sums[i] += static_cast<double>(row[i]) * row[i];
  }
  s.tokens += n;
  if (keep_inputs_) s.inputs.insert(s.inputs.end(), x, x + static_cast<size_t>(n) * width);
  if (s.gram.empty()) return;
  // H += X^T X as a symmetric rank-n update (BLAS's syrk; quant/dense_blas.h), in double: the
  // sums run over every calibration token.
  std::vector<double> rows(x, x + static_cast<size_t>(n) * width);
  quant::dense::syrk_lower_add(s.gram.data(), static_cast<int64_t>(width), rows.data(), n);
}

std::vector<float> ActivationStats::mean_squares(MatrixInput input, int32_t layer) const {
  const Site& s = site(input, layer);
  if (s.tokens == 0) return {};
  std::vector<float> out(s.sums.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(s.sums[i] / static_cast<double>(s.tokens));
  return out;
}

int64_t ActivationStats::tokens(MatrixInput input, int32_t layer) const {
  return site(input, layer).tokens;
}

}  // namespace folio::cpu
