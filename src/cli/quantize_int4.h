// `folio quantize DIR OUT --type gptq | int4`: a Hugging Face directory (F32 / F16 / BF16) to a
// GPTQ 4-bit checkpoint in AutoGPTQ's layout (model/hf_gptq_pack.h), which transformers, vLLM
// and folio load. The seven matrices of every layer (q, k, v, o, gate, up, down) are quantized,
// in groups of --group-size inputs; everything else is kept, in fp16. gptq runs the model over
// a calibration text first (on the CPU, as the importance matrix does) for each matrix input's
// Gram matrix, then GPTQ (quant/gptq.h); int4 rounds to nearest (the baseline GPTQ must beat).
// Written into OUT.partial and renamed when complete, so a failure leaves no OUT.
#pragma once

#include <string>

#include "quant/gptq.h"

namespace folio::cli {

struct Int4QuantizeRequest {
  std::string input, output;
  bool gptq = true;  // false: round to nearest
  quant::Int4Options options;
  std::string calibration_text;
  int32_t calibration_tokens = 4096;
  int threads = 0;
  bool quiet = false;
};

// The process exit code: 0, 1 (a file or model problem) or 2 (options that cannot work).
int quantize_hf_int4(const Int4QuantizeRequest& request);

}  // namespace folio::cli
