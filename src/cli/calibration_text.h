// The calibration text of `folio quantize` (--imatrix-text, --calibration-text): read before the
// model is opened (a missing file fails fast), then encoded by the model's tokenizer and cut to
// the tokens asked for. Both of its passes (cli/importance_matrix.h, cli/layerwise_calibration.h)
// read it in chunks of kCalibrationChunk tokens, each starting with BOS where the model adds one
// (as `folio perplexity` scores).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "text/tokenizer.h"

namespace folio::cli {

constexpr int32_t kCalibrationChunk = 512;

struct CalibrationText {
  std::string path;
  std::string text;
};

Expected<CalibrationText> read_calibration_text(const std::string& path);

// The text's first `tokens` tokens; an error naming `flag` (the option that asked for them) when
// it has fewer.
Expected<std::vector<int32_t>> calibration_tokens(const CalibrationText& text, const Tokenizer& tokenizer,
                                                  int32_t tokens, const std::string& flag);

// The token each chunk starts with: BOS where the model adds one.
std::optional<int32_t> chunk_bos(const Tokenizer& tokenizer);

}  // namespace folio::cli
