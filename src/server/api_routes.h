// The HTTP API without the transport: a request's method, path, headers and body in; either a
// whole response or a generation to run out. The connection (http_session) does the I/O.
//
//   GET  /health                200, empty body
//   GET  /v1/models             the served model
//   GET  /metrics               Prometheus text
//   POST /v1/completions        -> GenerationPlan
//   POST /v1/chat/completions   -> GenerationPlan
// With an API key set, every route but /health needs "Authorization: Bearer KEY" (401).
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

ApiResult handle_api_request(const ApiRequest& request, const ApiContext& context);

ApiResponse api_error(int status, const std::string& message);

}  // namespace folio::server
