#include "cli/calibration_text.h"

#include <fstream>
#include <sstream>

namespace folio::cli {

Expected<CalibrationText> read_calibration_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error("cannot read the calibration text '" + path + "'");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return CalibrationText{path, buffer.str()};
}

Expected<std::vector<int32_t>> calibration_tokens(const CalibrationText& text, const Tokenizer& tokenizer,
                                                  int32_t tokens, const std::string& flag) {
  std::vector<int32_t> ids = tokenizer.encode(text.text, /*add_special=*/true, /*parse_special=*/false);
  if (static_cast<int64_t>(ids.size()) < tokens) {
    return Status::error("the calibration text '" + text.path + "' has " + std::to_string(ids.size()) +
                         " tokens, fewer than " + flag + " " + std::to_string(tokens));
  }
  ids.resize(static_cast<size_t>(tokens));
  return ids;
}

std::optional<int32_t> chunk_bos(const Tokenizer& tokenizer) {
  if (tokenizer.add_bos()) return tokenizer.bos_id();
  return std::nullopt;
}

}  // namespace folio::cli
