#include "model/rope.h"

#include <cmath>

namespace folio {

std::vector<float> rope_inverse_frequencies(int32_t rotary_dim, float freq_base, const float* freq_factors) {
  std::vector<float> inv_freq(static_cast<size_t>(rotary_dim / 2));
  for (int32_t i = 0; i < rotary_dim / 2; ++i) {
    double f = std::pow(static_cast<double>(freq_base), -2.0 * i / rotary_dim);
    if (freq_factors != nullptr) f /= freq_factors[i];
    inv_freq[static_cast<size_t>(i)] = static_cast<float>(f);
  }
  return inv_freq;
}

}  // namespace folio
