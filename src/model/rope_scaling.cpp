#include "model/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace folio {

std::vector<float> llama3_rope_freq_factors(int32_t rotary_dim, float freq_base, const Llama3RopeScaling& s) {
  const double low_freq_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
  const double high_freq_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
  std::vector<float> factors;
  for (int32_t i = 0; i < rotary_dim / 2; ++i) {
    const double freq = std::pow(static_cast<double>(freq_base), -2.0 * i / rotary_dim);
    const double wavelen = 2.0 * std::numbers::pi / freq;
    if (wavelen < high_freq_wavelen) {
      factors.push_back(1.0f);
    } else if (wavelen > low_freq_wavelen) {
      factors.push_back(static_cast<float>(s.factor));
    } else {
      const double smooth =
          (s.original_max_position_embeddings / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      factors.push_back(static_cast<float>(1.0 / ((1.0 - smooth) / s.factor + smooth)));
    }
  }
  return factors;
}

std::vector<float> yarn_rope_freq_factors(int32_t rotary_dim, float freq_base, const YarnRopeScaling& s) {
  const double base = freq_base;
  const double dim = rotary_dim;
  // The dimension whose wavelength turns `rotations` times over the original context.
  auto correction_dim = [&](double rotations) {
    return dim * std::log(s.original_max_position_embeddings / (rotations * 2.0 * std::numbers::pi)) /
           (2.0 * std::log(base));
  };
  double low = std::floor(correction_dim(s.beta_fast));
  double high = std::ceil(correction_dim(s.beta_slow));
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1.0);
  if (low == high) high += 0.001;  // transformers' guard against a zero-width ramp
  std::vector<float> factors;
  for (int32_t i = 0; i < rotary_dim / 2; ++i) {
    // extrapolation_factor = 1 - ramp: 1 keeps the frequency, 0 interpolates it.
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double extrapolation = 1.0 - ramp;
    // inv_freq = inv_freq_interpolation * (1 - e) + inv_freq_extrapolation * e, with
    // interpolation = extrapolation / factor: a divisor of 1 / ((1 - e) / factor + e).
    factors.push_back(static_cast<float>(1.0 / ((1.0 - extrapolation) / s.factor + extrapolation)));
  }
  return factors;
}

double yarn_attention_factor(const YarnRopeScaling& s) {
  if (s.attention_factor > 0.0) return s.attention_factor;
  return s.factor <= 1.0 ? 1.0 : 0.1 * std::log(s.factor) + 1.0;
}

}  // namespace folio
