// `folio quantize --imatrix-text`: an importance matrix computed by folio. The model (the
// quantizer's input file, on the CPU) reads the first N tokens of a calibration text in chunks
// of 512, as `folio perplexity` does, while its forward adds each matrix input's x_i^2 to
// cpu::ActivationStats; a weight then gets the mean squares of its input as the quantizer's
// per-column error weights (quant/quantize_search.h).
#pragma once

#include <memory>
#include <string>

#include "backend/cpu/activation_stats.h"
#include "core/status.h"
#include "model/gguf_quantize.h"

namespace folio::cli {

// An error when the text has fewer than `tokens` tokens (nothing is run then). gram: each input's
// whole Gram matrix too (GPTQ's H).
Expected<std::unique_ptr<cpu::ActivationStats>> collect_importance(const std::string& model_path,
                                                                   const std::string& text_path, int32_t tokens,
                                                                   int threads, bool quiet, bool gram = false);

// The statistics as quantize_gguf's importance: blk.L.attn_{q,k,v} from the attention input,
// attn_output from the attention's output, ffn_{gate,up} from the FFN input, ffn_down from
// SwiGLU's output; other tensors get none.
ImportanceFn importance_of(const cpu::ActivationStats& stats);

}  // namespace folio::cli
