#include "server/openai_response.h"

#include <algorithm>
#include <cmath>

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

// JSON has no infinities: a logprob of -inf (a token the model gave no chance, a masked row) is
// written as -9999.0, the number vLLM writes for it; NaN the same.
double logprob_number(float logprob) {
  return std::isfinite(logprob) ? static_cast<double>(logprob) : -9999.0;
}

ordered_json finish_reason_json(FinishReason reason) {
  if (reason == FinishReason::kNone) return nullptr;
  return finish_reason_name(reason);
}

}  // namespace

std::string error_body(int http_status, const std::string& message) {
  ordered_json error = {
      {"message", message}, {"type", error_type(http_status)}, {"param", nullptr}, {"code", http_status}};
  return dump(ordered_json{{"error", error}});
}

std::string models_body(const std::string& model_name, int64_t created) {
  ordered_json model = {{"id", model_name}, {"object", "model"}, {"created", created}, {"owned_by", "folio"}};
  return dump(ordered_json{{"object", "list"}, {"data", ordered_json::array({model})}});
}

ResponseAssembler::ResponseAssembler(ResponseIdentity identity, const Tokenizer* tokenizer)
    : identity_(std::move(identity)), tokenizer_(tokenizer) {}

// Consumes choice.pending_samples. Completions use OpenAI's legacy shape (parallel lists of
// tokens, logprobs, top-N maps, text offsets); chat the per-token objects with UTF-8 bytes,
// which is how a token that is half of a character can still be shown.
ordered_json ResponseAssembler::logprobs_json(Choice& choice) const {
  auto piece = [&](int32_t id) -> std::string {
    return tokenizer_ != nullptr ? tokenizer_->token_to_piece(id) : std::to_string(id);
  };
  auto bytes_of = [](const std::string& text) {
    ordered_json bytes = ordered_json::array();
    for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
    return bytes;
  };
  ordered_json result;
  if (identity_.kind == ApiKind::kChat) {
    ordered_json content = ordered_json::array();
    for (const SampleResult& sample : choice.pending_samples) {
      const std::string text = piece(sample.token);
      ordered_json top = ordered_json::array();
      for (const auto& [id, logprob] : sample.top_logprobs) {
        const std::string t = piece(id);
        top.push_back({{"token", t}, {"logprob", logprob_number(logprob)}, {"bytes", bytes_of(t)}});
      }
      content.push_back({{"token", text},
                         {"logprob", logprob_number(sample.logprob)},
                         {"bytes", bytes_of(text)},
                         {"top_logprobs", top}});
    }
    result = {{"content", content}, {"refusal", nullptr}};
  } else {
    ordered_json tokens = ordered_json::array(), logprobs = ordered_json::array();
    ordered_json tops = ordered_json::array(), offsets = ordered_json::array();
    for (const SampleResult& sample : choice.pending_samples) {
      const std::string text = piece(sample.token);
      tokens.push_back(text);
      logprobs.push_back(logprob_number(sample.logprob));
      ordered_json top = ordered_json::object();
      for (const auto& [id, logprob] : sample.top_logprobs) top[piece(id)] = logprob_number(logprob);
      tops.push_back(identity_.logprobs > 0 ? top : ordered_json(nullptr));
      offsets.push_back(choice.text_offset);
      choice.text_offset += static_cast<int64_t>(text.size());
    }
    result = {{"tokens", tokens}, {"token_logprobs", logprobs}, {"top_logprobs", tops}, {"text_offset", offsets}};
  }
  choice.pending_samples.clear();
  return result;
}

ordered_json ResponseAssembler::usage_json() const {
  int32_t completion_tokens = 0, prompt_tokens = 0;
  for (const auto& [key, choice] : choices_) completion_tokens += choice.num_output_tokens;
  for (const auto& [prompt, tokens] : prompt_tokens_) prompt_tokens += tokens;
  return ordered_json{{"prompt_tokens", prompt_tokens},
                      {"completion_tokens", completion_tokens},
                      {"total_tokens", prompt_tokens + completion_tokens}};
}

std::string ResponseAssembler::chunk_event(int32_t index, const std::string* text, bool role, FinishReason reason,
                                           Choice* logprobs_from) const {
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
  if (logprobs_from != nullptr && identity_.logprobs >= 0) {
    choice["logprobs"] = logprobs_json(*logprobs_from);
  }
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

std::string ResponseAssembler::add(int32_t prompt, const RequestOutput& out) {
  auto [it, inserted] = choices_.try_emplace(std::make_pair(prompt, out.index));
  Choice& choice = it->second;
  const int32_t index = choice_index(prompt, out.index);
  const std::string* echo = static_cast<size_t>(prompt) < identity_.echo.size() ? &identity_.echo[prompt] : nullptr;
  if (inserted && echo != nullptr) {
    if (!identity_.stream) choice.text = *echo;
    choice.text_offset = static_cast<int64_t>(echo->size());
  }
  if (identity_.logprobs >= 0) {
    choice.pending_samples.insert(choice.pending_samples.end(), out.new_samples.begin(), out.new_samples.end());
  }
  prompt_tokens_[prompt] = out.num_prompt_tokens;
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
  const bool chat = identity_.kind == ApiKind::kChat;
  if (chat && !choice.started) {
    const std::string empty;
    events += chunk_event(index, &empty, /*role=*/true, FinishReason::kNone, nullptr);
  }
  // Completions with echo: the prompt goes out first, in a chunk of its own.
  if (!chat && !choice.started && echo != nullptr && !echo->empty()) {
    events += chunk_event(index, echo, /*role=*/false, FinishReason::kNone, nullptr);
  }
  choice.started = true;
  if (!out.text_delta.empty() || out.finished) {
    const std::string* text = (!out.text_delta.empty() || !chat) ? &out.text_delta : nullptr;
    events += chunk_event(index, text, /*role=*/false, out.finished ? out.finish_reason : FinishReason::kNone, &choice);
  }
  if (done()) {
    if (identity_.include_usage) {
      ordered_json usage_chunk = {
          {"id", identity_.id},
          {"object", identity_.kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion"},
          {"created", identity_.created},
          {"model", identity_.model},
          {"system_fingerprint", kSystemFingerprint},
          {"choices", ordered_json::array()},
          {"usage", usage_json()}};
      events += "data: " + dump(usage_chunk) + "\n\n";
    }
    events += "data: [DONE]\n\n";
  }
  return events;
}

std::string ResponseAssembler::body() {
  const bool chat = identity_.kind == ApiKind::kChat;
  ordered_json choices = ordered_json::array();
  for (auto& [key, choice] : choices_) {
    ordered_json c = {{"index", choice_index(key.first, key.second)}};
    if (chat) {
      c["message"] = {{"role", "assistant"}, {"content", choice.text}};
    } else {
      c["text"] = choice.text;
    }
    c["logprobs"] = nullptr;
    if (identity_.logprobs >= 0) c["logprobs"] = logprobs_json(choice);
    c["finish_reason"] = finish_reason_json(choice.finish_reason);
    choices.push_back(std::move(c));
  }
  ordered_json response = {{"id", identity_.id},
                           {"object", chat ? "chat.completion" : "text_completion"},
                           {"created", identity_.created},
                           {"model", identity_.model},
                           {"system_fingerprint", kSystemFingerprint},
                           {"choices", std::move(choices)},
                           {"usage", usage_json()}};
  return dump(response);
}

}  // namespace folio::server
