// The OpenAI side of `folio bench serve`, without the transport: the JSON body of a streamed
// completion or chat completion, and the reading of the events that answer it into a
// RequestRecord (TTFT, inter-token latencies, E2E, token counts).
//
// A content chunk is an event whose first choice carries non-empty text (completions: "text",
// chat: "delta.content"): a role-only first chat chunk or a finish-only last chunk carries no
// token. The stream ends at "[DONE]" (or the last event, if a server sends none).
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/bench_serve_http_client.h"
#include "cli/bench_serve_metrics.h"

namespace folio::cli {

enum class ApiKind { kCompletions, kChatCompletions };

// By the endpoint's path: ".../chat/completions" is chat, ".../completions" plain completions.
std::optional<ApiKind> api_kind_of(std::string_view endpoint);

// What every request body carries besides its prompt and max_tokens.
struct RequestFields {
  std::string model;
  double temperature = 0.0;
  // "ignore_eos": true (vLLM, SGLang, folio): generate max_tokens whatever the model says.
  bool ignore_eos = false;
  // Each gets "logit_bias" -100, for servers that take no ignore_eos (llama-cpp-python).
  std::vector<int32_t> banned_token_ids;
  // Merged in last, so it may override any field above.
  nlohmann::json extra_body = nlohmann::json::object();
};

// Always streamed, with stream_options.include_usage so that servers that can report the
// token counts they used.
std::string openai_request_body(ApiKind kind, const RequestFields& fields, const std::string& prompt,
                                int32_t max_tokens);

// The message of an OpenAI ({"error": {"message"}}) or FastAPI ({"detail"}) error body,
// prefixed by the status, or the start of the body when it is neither.
std::string describe_http_error(int status, const std::string& body);

class OpenAiStreamRecorder {
 public:
  using Clock = std::chrono::steady_clock;

  OpenAiStreamRecorder(ApiKind kind, Clock::time_point sent) : kind_(kind), sent_(sent) {}

  void on_event(std::string_view data, Clock::time_point arrival);

  // The request's record once its exchange ended at `end`. Without usage from the server,
  // content chunks count the output tokens and local_prompt_tokens stands in for its prompt count.
  RequestRecord finish(const HttpOutcome& outcome, Clock::time_point end, int32_t local_prompt_tokens,
                       int32_t max_tokens) const;

  const std::string& text() const { return text_; }

 private:
  double since_sent(Clock::time_point t) const;

  ApiKind kind_;
  Clock::time_point sent_;
  std::optional<Clock::time_point> first_content_;
  Clock::time_point last_content_{};
  std::optional<Clock::time_point> stream_end_;  // [DONE]
  std::optional<Clock::time_point> last_event_;
  std::vector<double> itls_s_;
  std::string text_;
  int32_t num_content_chunks_ = 0;
  std::optional<int32_t> usage_prompt_tokens_;
  std::optional<int32_t> usage_completion_tokens_;
  std::string stream_error_;  // an error event, or an event that is not JSON
};

}  // namespace folio::cli
