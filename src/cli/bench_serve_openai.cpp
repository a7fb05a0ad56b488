#include "cli/bench_serve_openai.h"

namespace folio::cli {

using nlohmann::json;

namespace {

constexpr size_t kMaxQuotedChars = 200;

std::string one_line(std::string_view text) {
  std::string out(text.substr(0, kMaxQuotedChars));
  for (char& c : out) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return text.size() > kMaxQuotedChars ? out + "..." : out;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::optional<int32_t> integer_field(const json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int32_t>();
}

}  // namespace

std::optional<ApiKind> api_kind_of(std::string_view endpoint) {
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.remove_suffix(1);
  if (ends_with(endpoint, "/chat/completions")) return ApiKind::kChatCompletions;
  if (ends_with(endpoint, "/completions")) return ApiKind::kCompletions;
  return std::nullopt;
}

std::string openai_request_body(ApiKind kind, const RequestFields& fields, const std::string& prompt,
                                int32_t max_tokens) {
  json body = json::object();
  body["model"] = fields.model;
  if (kind == ApiKind::kChatCompletions) {
    body["messages"] = json::array({json{{"role", "user"}, {"content", prompt}}});
  } else {
    body["prompt"] = prompt;
  }
  body["max_tokens"] = max_tokens;
  body["temperature"] = fields.temperature;
  body["stream"] = true;
  body["stream_options"] = json{{"include_usage", true}};
  if (fields.ignore_eos) body["ignore_eos"] = true;
  if (!fields.banned_token_ids.empty()) {
    json bias = json::object();
    for (const int32_t id : fields.banned_token_ids) bias[std::to_string(id)] = -100;
    body["logit_bias"] = std::move(bias);
  }
  if (fields.extra_body.is_object()) {
    for (const auto& [key, value] : fields.extra_body.items()) body[key] = value;
  }
  // Prompts are valid UTF-8 by construction; replace rather than throw if one is not.
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string describe_http_error(int status, const std::string& body) {
  const std::string prefix = "HTTP " + std::to_string(status) + ": ";
  const json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object()) {
    const auto error = parsed.find("error");
    if (error != parsed.end() && error->is_object()) {
      const auto message = error->find("message");
      if (message != error->end() && message->is_string()) return prefix + one_line(message->get<std::string>());
    }
    if (error != parsed.end() && error->is_string()) return prefix + one_line(error->get<std::string>());
    const auto detail = parsed.find("detail");
    if (detail != parsed.end()) {
      return prefix + one_line(detail->is_string() ? detail->get<std::string>() : detail->dump());
    }
  }
  return prefix + (body.empty() ? std::string("(empty body)") : one_line(body));
}

void OpenAiStreamRecorder::on_event(std::string_view data, Clock::time_point arrival) {
  last_event_ = arrival;
  if (data == "[DONE]") {
    stream_end_ = arrival;
    return;
  }
  const json chunk = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (!chunk.is_object()) {
    if (stream_error_.empty()) stream_error_ = "an event is not a JSON object: " + one_line(data);
    return;
  }
  if (const auto error = chunk.find("error"); error != chunk.end() && !error->is_null()) {
    if (stream_error_.empty()) stream_error_ = "the stream reported an error: " + one_line(error->dump());
    return;
  }
  if (const auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) {
    if (auto n = integer_field(*usage, "prompt_tokens")) usage_prompt_tokens_ = n;
    if (auto n = integer_field(*usage, "completion_tokens")) usage_completion_tokens_ = n;
  }
  const auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array() || choices->empty() || !(*choices)[0].is_object()) return;
  const json& choice = (*choices)[0];
  const json* text = nullptr;
  if (kind_ == ApiKind::kChatCompletions) {
    const auto delta = choice.find("delta");
    if (delta != choice.end() && delta->is_object()) {
      const auto content = delta->find("content");
      if (content != delta->end()) text = &*content;
    }
  } else {
    const auto it = choice.find("text");
    if (it != choice.end()) text = &*it;
  }
  if (text == nullptr || !text->is_string() || text->get_ref<const std::string&>().empty()) return;
  ++num_content_chunks_;
  if (!first_content_) {
    first_content_ = arrival;
  } else {
    itls_s_.push_back(std::chrono::duration<double>(arrival - last_content_).count());
  }
  last_content_ = arrival;
  text_ += text->get_ref<const std::string&>();
}

double OpenAiStreamRecorder::since_sent(Clock::time_point t) const {
  return std::chrono::duration<double>(t - sent_).count();
}

RequestRecord OpenAiStreamRecorder::finish(const HttpOutcome& outcome, Clock::time_point end,
                                           int32_t local_prompt_tokens, int32_t max_tokens) const {
  RequestRecord r;
  r.requested_output_tokens = max_tokens;
  if (!outcome.error.empty()) {
    r.error =
        outcome.status != 0 ? "HTTP " + std::to_string(outcome.status) + ", then " + outcome.error : outcome.error;
  } else if (outcome.status < 200 || outcome.status >= 300) {
    r.error = describe_http_error(outcome.status, outcome.body);
  } else if (!stream_error_.empty()) {
    r.error = stream_error_;
  } else if (!first_content_) {
    r.error = "the stream carried no generated text";
  }
  r.success = r.error.empty();
  r.ttft_s = first_content_ ? since_sent(*first_content_) : 0.0;
  r.e2e_s = since_sent(stream_end_ ? *stream_end_ : last_event_ ? *last_event_ : end);
  r.itls_s = itls_s_;
  r.prompt_tokens_from_server = usage_prompt_tokens_.has_value();
  r.prompt_tokens = usage_prompt_tokens_.value_or(local_prompt_tokens);
  if (usage_completion_tokens_) {
    r.output_tokens = *usage_completion_tokens_;
    r.output_tokens_source = TokenCountSource::kServerUsage;
  } else {
    r.output_tokens = num_content_chunks_;
    r.output_tokens_source = TokenCountSource::kChunks;
  }
  return r;
}

}  // namespace folio::cli
