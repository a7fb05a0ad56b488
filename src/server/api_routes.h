// The HTTP API without the transport: a request's method, path, headers and body in; either a
// whole response or a generation to run out. The connection (http_session) does the I/O.
//
//   GET  /health                200, empty body
//   GET  /, /index.html         the chat page
//   GET  /v1/models             the served model
//   GET  /metrics               Prometheus text
//   POST /v1/completions        -> GenerationPlan
//   POST /v1/chat/completions   -> GenerationPlan
//   POST /tokenize, /detokenize vLLM's shapes
// HEAD is GET without the body. With an API key set, every route but /health and the chat page
// needs "Authorization: Bearer KEY" (401). Routing needs the request line and that header only,
// so a connection answers 401 / 404 / 405 before it reads a body.
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "server/engine_worker.h"
#include "server/generation_plan.h"

namespace folio::server {

struct ApiContext {
  EngineWorker* worker = nullptr;
  ModelInfo model;
  std::string api_key;  // empty: no authentication
  int64_t created = 0;  // Unix seconds the server started (the model's "created")
};

struct ApiRequest {
  std::string_view method;
  std::string_view target;         // path and query
  std::string_view authorization;  // the Authorization header
  std::string_view body;
};

struct ApiResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

using ApiResult = std::variant<ApiResponse, GenerationPlan>;

enum class Route { kHealth, kChatPage, kModels, kMetrics, kCompletions, kChatCompletions, kTokenize, kDetokenize };

// Where the request goes, or the response that ends it: 404 unknown path, 401 missing or wrong
// key, 405 wrong method (HEAD counts as GET).
std::variant<Route, ApiResponse> route_request(std::string_view method, std::string_view target,
                                               std::string_view authorization, const ApiContext& context);

// The response, or the generation, of a routed request with its whole body. Parsing and
// planning (tokenizing, rendering chat templates) happen here: callers run it off the io threads.
ApiResult handle_route(Route route, std::string_view body, const ApiContext& context);

// Both in one call.
ApiResult handle_api_request(const ApiRequest& request, const ApiContext& context);

ApiResponse api_error(int status, const std::string& message);

}  // namespace folio::server
