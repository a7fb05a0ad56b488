#include "server/tokenize_routes.h"

#include <nlohmann/json.hpp>

#include "engine/request_limits.h"
#include "server/openai_request.h"

namespace folio::server {
namespace {

using nlohmann::ordered_json;

std::string dump(const ordered_json& value) {
  return value.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

bool other_model(const std::string& asked, const ModelInfo& model) {
  return !asked.empty() && asked != model.name;
}

ApiResponse unknown_model(const std::string& asked, const ModelInfo& model) {
  return api_error(404, "the model '" + asked + "' does not exist; this server serves '" + model.name + "'");
}

}  // namespace

ApiResponse handle_tokenize(std::string_view body, const ModelInfo& model) {
  Expected<TokenizeRequest> request = parse_tokenize_request(body);
  if (!request) return api_error(400, request.error());
  if (other_model(request->model, model)) return unknown_model(request->model, model);
  std::vector<int32_t> tokens;
  if (request->prompt) {
    // As /v1/completions encodes a prompt.
    tokens = model.tokenizer->encode(*request->prompt, request->add_special_tokens, /*parse_special=*/false);
  } else {
    Expected<std::vector<int32_t>> rendered =
        chat_prompt_tokens(request->messages, model, request->add_generation_prompt);
    if (!rendered) return api_error(400, rendered.error());
    tokens = std::move(rendered).value();
  }
  ordered_json response = {{"count", tokens.size()}, {"max_model_len", model.context_tokens}, {"tokens", tokens}};
  if (request->return_token_strs) {
    ordered_json strs = ordered_json::array();
    for (int32_t id : tokens) strs.push_back(model.tokenizer->token_to_piece(id));
    response["token_strs"] = strs;
  }
  return ApiResponse{200, "application/json", dump(response)};
}

ApiResponse handle_detokenize(std::string_view body, const ModelInfo& model) {
  Expected<DetokenizeRequest> request = parse_detokenize_request(body);
  if (!request) return api_error(400, request.error());
  if (other_model(request->model, model)) return unknown_model(request->model, model);
  if (Status s = check_token_ids(request->tokens, model.tokenizer->vocab_size()); !s)
    return api_error(400, s.message());
  return ApiResponse{200, "application/json", dump(ordered_json{{"prompt", model.tokenizer->decode(request->tokens)}})};
}

}  // namespace folio::server
