// OpenAI-shaped response bodies: errors, completions and chat completions (whole or as SSE
// chunks), the model list. Pure functions of plain values; the HTTP layer only writes them.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "text/tokenizer.h"

namespace folio::server {

// {"error": {"message", "type", "param", "code"}}; type follows the HTTP status
// (400 invalid_request_error, 401 authentication_error, 404 not_found_error, ...).
std::string error_body(int http_status, const std::string& message);

std::string models_body(const std::string& model_name, int64_t created);

enum class ApiKind { kCompletion, kChat };

// What every response and chunk of one request repeats.
struct ResponseIdentity {
  ApiKind kind = ApiKind::kCompletion;
  std::string id;       // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
  int32_t n = 1;            // samples per prompt
  int32_t num_prompts = 1;  // completions may carry several; OpenAI numbers their choices prompt by prompt
  bool stream = false;
  bool include_usage = false;
  int32_t logprobs = -1;          // -1: none; N >= 0: each token's logprob and the N most likely
  std::vector<std::string> echo;  // completions with echo: each prompt's text, starting its choices
};

inline constexpr const char* kSystemFingerprint = "fp_folio";

// Turns one request's RequestOutputs into what the client reads. Streaming: add() returns the
// SSE events to write now, the last call also the usage chunk (if asked) and "data: [DONE]".
// Not streaming: add() gathers and body() is the whole response once done().
// Logprobs name tokens by their text, so the tokenizer is needed when identity.logprobs >= 0.
class ResponseAssembler {
 public:
  explicit ResponseAssembler(ResponseIdentity identity, const Tokenizer* tokenizer = nullptr);

  // out is sample out.index of prompt `prompt` (of identity.num_prompts).
  std::string add(int32_t prompt, const RequestOutput& out);
  bool done() const { return num_finished_ == identity_.n * identity_.num_prompts; }
  std::string body();  // consumes the gathered logprobs: call once
  const ResponseIdentity& identity() const { return identity_; }

 private:
  struct Choice {
    std::string text;
    FinishReason finish_reason = FinishReason::kNone;
    int32_t num_output_tokens = 0;
    bool started = false;  // streaming: the first chunk (chat: the role) went out
    // Samples not yet sent: a token's text may be held back (a possible stop string) while its
    // logprob is known, so logprobs ride on the next chunk that goes out.
    std::vector<SampleResult> pending_samples;
    int64_t text_offset = 0;  // completions: where the next token's text starts
  };
  // The choice's index in OpenAI's numbering: samples of prompt 0 first, then prompt 1's, ...
  int32_t choice_index(int32_t prompt, int32_t sample) const { return prompt * identity_.n + sample; }
  std::string chunk_event(int32_t index, const std::string* text, bool role, FinishReason reason,
                          Choice* logprobs_from) const;
  nlohmann::ordered_json usage_json() const;
  nlohmann::ordered_json logprobs_json(Choice& choice) const;

  ResponseIdentity identity_;
  const Tokenizer* tokenizer_;
  std::map<std::pair<int32_t, int32_t>, Choice> choices_;  // (prompt, sample) -> choice
  int32_t num_finished_ = 0;
  std::map<int32_t, int32_t> prompt_tokens_;  // per prompt
};

}  // namespace folio::server
