// The OpenAI request bodies folio accepts (/v1/completions, /v1/chat/completions), parsed and
// checked by pure functions: a body in, a request or a Status a client can act on out. Every
// Status here becomes a 400 with OpenAI's error JSON; nothing here touches the engine, so the
// parser can be unit-tested and fuzzed alone.
//
// Accepted fields: model, prompt (string, [token ids], or a list of either), messages,
// max_tokens (chat: max_completion_tokens too), temperature, top_p, top_k, min_p, seed, stop
// (string or list), stop_token_ids, n, presence_penalty, frequency_penalty,
// repetition_penalty, ignore_eos, stream, stream_options.include_usage, user; completions:
// logprobs (0..20) and echo; chat: logprobs (bool) and top_logprobs (0..20). JSON null means
// "not given". Unknown fields are ignored, as OpenAI does; fields folio does not implement
// (suffix, best_of > 1, tools, logit_bias, echo with logprobs) are refused rather than
// silently dropped.
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
  std::string model;                  // empty: not given
  RequestParams params;               // max_tokens left at its default; see max_tokens below
  std::optional<int32_t> max_tokens;  // not given: the endpoint's default
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: the prompt's text starts each choice
};

// One prompt of a completion request: text, or token ids when text is not set.
struct CompletionPrompt {
  std::optional<std::string> text;
  std::vector<int32_t> tokens;
};

struct CompletionRequest {
  GenerationOptions options;
  // At least one. Several prompts ("prompt": ["a", "b"] or [[1, 2], [3]]) run as separate
  // sequences whose choices are numbered prompt * n + sample, as OpenAI does.
  std::vector<CompletionPrompt> prompts;
};

struct ChatCompletionRequest {
  GenerationOptions options;
  std::vector<ChatMessage> messages;  // at least one
};

// Limits on what one request may ask for.
inline constexpr int32_t kMaxRequestTokens = 1 << 20;
inline constexpr int32_t kMaxParallelSamples = 128;
inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxPrompts = 256;    // per completion request
inline constexpr int64_t kMaxChoices = 1024;  // prompts x n

// POST /tokenize and /detokenize (vLLM's extension): text or chat messages to token ids and
// back, so clients can count tokens the way the server will.
struct TokenizeRequest {
  std::string model;
  std::optional<std::string> prompt;  // or messages
  std::vector<ChatMessage> messages;
  bool add_special_tokens = true;     // prompt: BOS as the model's metadata says
  bool add_generation_prompt = true;  // messages: end with the assistant's turn opened
  bool return_token_strs = false;
};

struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};

// defaults: the sampling values a request that gives none gets (the model's
// generation_config.json, as vLLM applies it; else SamplingParams' own defaults).
Expected<CompletionRequest> parse_completion_request(std::string_view body, const SamplingParams& defaults = {});
Expected<ChatCompletionRequest> parse_chat_completion_request(std::string_view body,
                                                              const SamplingParams& defaults = {});
Expected<TokenizeRequest> parse_tokenize_request(std::string_view body);
Expected<DetokenizeRequest> parse_detokenize_request(std::string_view body);

}  // namespace folio::server
