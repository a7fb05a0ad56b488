#include "server/openai_response.h"

#include <nlohmann/json.hpp>

namespace folio::server {
namespace {

using nlohmann::ordered_json;

// Generated text is complete UTF-8, but a prompt echoed in an error need not be.
std::string dump(const ordered_json& value) {
  return value.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

const char* error_type(int http_status) {
  switch (http_status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 405: return "method_not_allowed_error";
    case 408: return "timeout_error";
    case 413: return "request_too_large_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable_error";
    default: return http_status >= 500 ? "internal_server_error" : "invalid_request_error";
  }
}

ordered_json finish_reason_json(FinishReason reason) {
  if (reason == FinishReason::kNone) return nullptr;
  return finish_reason_name(reason);
}

}  // namespace

std::string error_body(int http_status, const std::string& message) {
  ordered_json error = {{"message", message}, {"type", error_type(http_status)}, {"param", nullptr}, {"code", http_status}};
  return dump(ordered_json{{"error", error}});
}

std::string models_body(const std::string& model_name, int64_t created) {
  ordered_json model = {{"id", model_name}, {"object", "model"}, {"created", created}, {"owned_by", "folio"}};
  return dump(ordered_json{{"object", "list"}, {"data", ordered_json::array({model})}});
}

ResponseAssembler::ResponseAssembler(ResponseIdentity identity) : identity_(std::move(identity)) {}

std::string ResponseAssembler::usage_json_text() const {
  int32_t completion_tokens = 0;
  for (const auto& [index, choice] : choices_) completion_tokens += choice.num_output_tokens;
  return dump(ordered_json{{"prompt_tokens", num_prompt_tokens_},
                           {"completion_tokens", completion_tokens},
                           {"total_tokens", num_prompt_tokens_ + completion_tokens}});
}

std::string ResponseAssembler::chunk_event(int32_t index, const std::string* text, bool role, FinishReason reason) const {
  const bool chat = identity_.kind == ApiKind::kChat;
  ordered_json choice = {{"index", index}};
  if (chat) {
    ordered_json delta = ordered_json::object();
    if (role) delta["role"] = "assistant";
    if (text != nullptr) delta["content"] = *text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text != nullptr ? *text : std::string();
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason_json(reason);
  ordered_json chunk = {{"id", identity_.id},
                        {"object", chat ? "chat.completion.chunk" : "text_completion"},
                        {"created", identity_.created},
                        {"model", identity_.model},
                        {"system_fingerprint", kSystemFingerprint},
                        {"choices", ordered_json::array({choice})}};
  if (identity_.include_usage) chunk["usage"] = nullptr;  // as OpenAI: null until the last chunk
  return "data: " + dump(chunk) + "\n\n";
}

std::string ResponseAssembler::add(const RequestOutput& out) {
  Choice& choice = choices_[out.index];
  num_prompt_tokens_ = out.num_prompt_tokens;
  choice.num_output_tokens = out.num_output_tokens;
  if (out.finished) {
    choice.finish_reason = out.finish_reason;
    ++num_finished_;
  }
  if (!identity_.stream) {
    choice.text += out.text_delta;
    return {};
  }
  std::string events;
  if (identity_.kind == ApiKind::kChat && !choice.started) {
    const std::string empty;
    events += chunk_event(out.index, &empty, /*role=*/true, FinishReason::kNone);
  }
  choice.started = true;
  if (!out.text_delta.empty() || out.finished) {
    const bool chat = identity_.kind == ApiKind::kChat;
    const std::string* text = (!out.text_delta.empty() || !chat) ? &out.text_delta : nullptr;
    events += chunk_event(out.index, text, /*role=*/false, out.finished ? out.finish_reason : FinishReason::kNone);
  }
  if (done()) {
    if (identity_.include_usage) {
      ordered_json usage_chunk = {{"id", identity_.id},
                                  {"object", identity_.kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion"},
                                  {"created", identity_.created},
                                  {"model", identity_.model},
                                  {"system_fingerprint", kSystemFingerprint},
                                  {"choices", ordered_json::array()},
                                  {"usage", ordered_json::parse(usage_json_text())}};
      events += "data: " + dump(usage_chunk) + "\n\n";
    }
    events += "data: [DONE]\n\n";
  }
  return events;
}

std::string ResponseAssembler::body() const {
  const bool chat = identity_.kind == ApiKind::kChat;
  ordered_json choices = ordered_json::array();
  for (const auto& [index, choice] : choices_) {
    ordered_json c = {{"index", index}};
    if (chat) {
      c["message"] = {{"role", "assistant"}, {"content", choice.text}};
    } else {
      c["text"] = choice.text;
    }
    c["logprobs"] = nullptr;
    c["finish_reason"] = finish_reason_json(choice.finish_reason);
    choices.push_back(std::move(c));
  }
  ordered_json response = {{"id", identity_.id},
                           {"object", chat ? "chat.completion" : "text_completion"},
                           {"created", identity_.created},
                           {"model", identity_.model},
                           {"system_fingerprint", kSystemFingerprint},
                           {"choices", std::move(choices)},
                           {"usage", ordered_json::parse(usage_json_text())}};
  return dump(response);
}

}  // namespace folio::server
