// OpenAI-shaped response bodies: errors, completions and chat completions (whole or as SSE
// chunks), the model list. Pure functions of plain values; the HTTP layer only writes them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/engine.h"

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
  int32_t n = 1;
  bool stream = false;
  bool include_usage = false;
};

inline constexpr const char* kSystemFingerprint = "fp_folio";

// Turns one request's RequestOutputs into what the client reads. Streaming: add() returns the
// SSE events to write now, the last call also the usage chunk (if asked) and "data: [DONE]".
// Not streaming: add() gathers and body() is the whole response once done().
class ResponseAssembler {
 public:
  explicit ResponseAssembler(ResponseIdentity identity);

  std::string add(const RequestOutput& out);
  bool done() const { return num_finished_ == identity_.n; }
  std::string body() const;
  const ResponseIdentity& identity() const { return identity_; }

 private:
  struct Choice {
    std::string text;
    FinishReason finish_reason = FinishReason::kNone;
    int32_t num_output_tokens = 0;
    bool started = false;  // chat streaming: the role chunk went out
  };
  std::string chunk_event(int32_t index, const std::string* text, bool role, FinishReason reason) const;
  std::string usage_json_text() const;

  ResponseIdentity identity_;
  std::map<int32_t, Choice> choices_;
  int32_t num_finished_ = 0;
  int32_t num_prompt_tokens_ = 0;
};

}  // namespace folio::server
