// Rotary position embedding as an architecture states it: which dimensions pair up, how many
// rotate, the base and the linear position scale. Devices turn a RopeSpec plus the model's
// frequency factors (Llama-3 scaling, a weight) into their own kernel arguments.
#pragma once

#include <cstdint>

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

}  // namespace folio
