// `folio synth --format hf`: synth_model.h's random-weight models as Hugging Face directories
// (config.json, tokenizer.json, tokenizer_config.json, model.safetensors), in BF16 or in the
// quantized checkpoint layouts users download: GPTQ (AutoGPTQ format v1, plain or act-order), AWQ
// (AutoAWQ's GEMM layout) and FP8 (llm-compressor's compressed-tensors float-quantized, E4M3 with
// one scale per output row), so that the loaders and kernels of those formats can be measured
// at 8B and 70B shapes without a download. One seed gives the same float weights as the GGUF
// writer's (Q and K rows in Hugging Face's order, as transformers stores them); the 4-bit ones
// are those weights rounded to nearest in groups, the FP8 ones each row scaled to E4M3's range
// and rounded (the values a loader must reproduce; how well they were chosen does not matter to
// a benchmark). Llama-family shapes only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"
#include "model/synth_model.h"

namespace folio {

enum class SynthHfFormat { kBf16, kGptq, kGptqActOrder, kAwq, kFp8 };

struct SynthHfOptions {
  SynthHfFormat format = SynthHfFormat::kBf16;
  uint64_t seed = 1;
  int32_t num_layers = 0;    // 0: the config's
  int64_t group_size = 128;  // 4-bit formats: inputs per scale (every width a multiple)
  bool symmetric = false;    // 4-bit formats: zero fixed at 8 (GPTQ sym); AWQ is always asymmetric
};

// Writes the directory `dir` (which must not exist) through dir.partial, renamed when complete.
// progress(bytes written, total bytes) as the tensors stream out.
Status write_synth_hf_model(const SynthConfig& config, const SynthHfOptions& options, const std::string& dir,
                            const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace folio
