// The OpenAI request bodies folio accepts (/v1/completions, /v1/chat/completions), parsed and
// checked by pure functions: a body in, a request or a Status a client can act on out. Every
// Status here becomes a 400 with OpenAI's error JSON; nothing here touches the engine, so the
// parser can be unit-tested and fuzzed alone.
//
// Accepted fields: model, prompt (string, [string] with one element, [token ids]), messages,
// max_tokens (chat: max_completion_tokens too), temperature, top_p, top_k, min_p, seed, stop
// (string or list), stop_token_ids, n, presence_penalty, frequency_penalty,
// repetition_penalty, ignore_eos, stream, stream_options.include_usage, user. JSON null means
// "not given". Unknown fields are ignored, as OpenAI does; fields folio does not implement yet
// (logprobs, echo, suffix, best_of > 1, tools) are refused rather than silently dropped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/request.h"
#include "text/chat_template.h"

namespace folio::server {

// What both endpoints share.
struct GenerationOptions {
  std::string model;                 // empty: not given
  RequestParams params;              // max_tokens left at its default; see max_tokens below
  std::optional<int32_t> max_tokens; // not given: the endpoint's default
  bool stream = false;
  bool include_usage = false;        // stream_options.include_usage
};

struct CompletionRequest {
  GenerationOptions options;
  // Exactly one of the two is set.
  std::optional<std::string> prompt_text;
  std::optional<std::vector<int32_t>> prompt_tokens;
};

struct ChatCompletionRequest {
  GenerationOptions options;
  std::vector<ChatMessage> messages;  // at least one
};

// Limits on what one request may ask for.
inline constexpr int32_t kMaxRequestTokens = 1 << 20;
inline constexpr int32_t kMaxParallelSamples = 128;
inline constexpr size_t kMaxStopStrings = 16;

Expected<CompletionRequest> parse_completion_request(std::string_view body);
Expected<ChatCompletionRequest> parse_chat_completion_request(std::string_view body);

}  // namespace folio::server
