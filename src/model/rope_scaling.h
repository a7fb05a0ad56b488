// RoPE frequency scaling schemes as per-pair divisors of the inverse frequencies (what a GGUF
// file's rope_freqs.weight holds and RopeParams::freq_factors applies): Llama 3's smooth band
// and YaRN's ramp between interpolation and extrapolation. Hugging Face configs name them in
// rope_scaling; GGUF files carry the factors themselves.
#pragma once

#include <cstdint>
#include <vector>

namespace folio {

struct Llama3RopeScaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position_embeddings = 8192.0;
};

// (rotary_dim / 2,) divisors: long wavelengths divided by factor, short ones kept, the band
// between interpolated (transformers' _compute_llama3_parameters).
std::vector<float> llama3_rope_freq_factors(int32_t rotary_dim, float freq_base, const Llama3RopeScaling& s = {});

struct YarnRopeScaling {
  double factor = 1.0;
  double original_max_position_embeddings = 0.0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double attention_factor = 0.0;  // 0: 0.1 ln(factor) + 1, as transformers defaults it
};

// (rotary_dim / 2,) divisors of YaRN (transformers' _compute_yarn_parameters): dims that turn
// fewer than beta_slow times over the original context are interpolated (divided by factor),
// those turning more than beta_fast times extrapolated (kept), a linear ramp between.
std::vector<float> yarn_rope_freq_factors(int32_t rotary_dim, float freq_base, const YarnRopeScaling& s);
// YaRN scales cos and sin by this (so q.k by its square).
double yarn_attention_factor(const YarnRopeScaling& s);

}  // namespace folio
