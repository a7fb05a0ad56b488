// POST /tokenize and POST /detokenize: the served model's tokenizer and chat template over
// HTTP. Whole responses, no engine involved.
//
//   /tokenize   {"prompt": "..."} or {"messages": [...]}  -> {"count", "max_model_len", "tokens"}
//   /detokenize {"tokens": [...]}                         -> {"prompt"}
#pragma once

#include <string_view>

#include "server/api_routes.h"

namespace folio::server {

ApiResponse handle_tokenize(std::string_view body, const ModelInfo& model);
ApiResponse handle_detokenize(std::string_view body, const ModelInfo& model);

}  // namespace folio::server
