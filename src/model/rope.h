// Rotary position embedding as an architecture states it: which dimensions pair up, how many
// rotate, the base and the linear position scale. Devices turn a RopeSpec plus the model's
// frequency factors (Llama-3 scaling, a weight) into their own kernel arguments.
#pragma once

#include <cstdint>
#include <vector>

namespace folio {

enum class RopeStyle {
  kAdjacentPairs,  // rotate (x[2i], x[2i+1]): GGUF llama layout (weights permuted at conversion)
  kHalves,         // rotate (x[i], x[i + d/2]): NeoX / Qwen2 layout
};

struct RopeSpec {
  RopeStyle style = RopeStyle::kAdjacentPairs;
  int32_t rotary_dim = 0;  // leading dims of each head that rotate (usually head_dim)
  float freq_base = 10000.0f;
  float position_scale = 1.0f;  // linear rope scaling: positions multiplied by this
};

// The angle step of each rotating pair, base^(-2i / rotary_dim) / factor_i for i < rotary_dim /
// 2: in float64, then rounded once to float. Every device rotates with this one table (the CPU
// per call, the GPU from a copy made at load), so their angles agree to the bit.
std::vector<float> rope_inverse_frequencies(int32_t rotary_dim, float freq_base, const float* freq_factors);

}  // namespace folio
