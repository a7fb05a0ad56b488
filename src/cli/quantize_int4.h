// `folio quantize DIR OUT --type gptq | awq | int4`: a Hugging Face directory (F32 / F16 / BF16)
// to a 4-bit checkpoint in AutoGPTQ's layout (model/hf_gptq_pack.h) or AutoAWQ's
// (model/hf_awq_pack.h), which transformers, vLLM and folio load. The seven matrices of every
// layer (q, k, v, o, gate, up, down) are quantized in groups of --group-size inputs; everything
// else is kept, in fp16. gptq and awq run a calibration text through the model on the CPU one
// layer at a time (layerwise_calibration.h) for each matrix input's RMS and Gram matrix, and
// treat each layer as its statistics come in: GPTQ (quant/gptq.h), whose quantized layer then
// computes the next layer's inputs, or AWQ's scales (quant/awq.h, folded into the norms and
// up's rows) and its clipping search (every matrix but q and k, as AutoAWQ), the next layer
// reading the float layer's outputs (as AutoAWQ), then round to nearest; int4 rounds to nearest
// in GPTQ's layout (the baseline both must beat).
// Written into OUT.partial and renamed when complete, so a failure leaves no OUT.
#pragma once

#include <string>

#include "quant/gptq.h"

namespace folio::cli {

struct Int4QuantizeRequest {
  std::string input, output;
  enum class Method { kRoundToNearest, kGptq, kAwq };
  Method method = Method::kGptq;
  quant::Int4Options options;
  std::string calibration_text;
  int32_t calibration_tokens = 4096;
  int threads = 0;
  bool quiet = false;
  bool awq_clip = true;  // awq: AWQ's clipping search after its scales (quant/awq.h)
};

// The process exit code: 0, 1 (a file or model problem) or 2 (options that cannot work).
int quantize_hf_int4(const Int4QuantizeRequest& request);

}  // namespace folio::cli
