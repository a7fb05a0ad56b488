#include "server/api_routes.h"

#include "server/chat_page.h"
#include "server/openai_response.h"
#include "server/prometheus_metrics.h"
#include "server/tokenize_routes.h"

namespace folio::server {
namespace {

std::string_view path_of(std::string_view target) {
  const size_t query = target.find('?');
  return query == std::string_view::npos ? target : target.substr(0, query);
}

// Compares in time independent of where the strings differ.
bool same_secret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0 && !b.empty();
}

bool authorized(std::string_view authorization, const ApiContext& context) {
  if (context.api_key.empty()) return true;
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.substr(0, kBearer.size()) != kBearer) return false;
  return same_secret(authorization.substr(kBearer.size()), context.api_key);
}

// Names the model a request asked for when it is not the one served (a 404).
std::optional<std::string> unknown_model(const std::string& asked, const ApiContext& context) {
  if (asked.empty() || asked == context.model.name) return std::nullopt;
  return "the model '" + asked + "' does not exist; this server serves '" + context.model.name + "'";
}

template <typename Request, typename Parse, typename Plan>
ApiResult generation(std::string_view body, const ApiContext& context, Parse parse, Plan plan) {
  Expected<Request> parsed = parse(body, context.model.default_sampling);
  if (!parsed) return api_error(400, parsed.error());
  if (auto message = unknown_model(parsed->options.model, context)) return api_error(404, *message);
  Expected<GenerationPlan> planned = plan(*parsed, context.model);
  if (!planned) return api_error(400, planned.error());
  return std::move(planned).value();
}

}  // namespace

ApiResponse api_error(int status, const std::string& message) {
  return ApiResponse{status, "application/json", error_body(status, message)};
}

std::variant<Route, ApiResponse> route_request(std::string_view method, std::string_view target,
                                               std::string_view authorization, const ApiContext& context) {
  const std::string_view path = path_of(target);
  const bool get = method == "GET" || method == "HEAD";
  const bool post = method == "POST";
  struct Known {
    std::string_view path;
    Route route;
    bool post;
    bool public_route;  // no key needed
  };
  static constexpr Known kRoutes[] = {{"/health", Route::kHealth, false, true},
                                      {"/", Route::kChatPage, false, true},
                                      {"/index.html", Route::kChatPage, false, true},
                                      {"/v1/models", Route::kModels, false, false},
                                      {"/metrics", Route::kMetrics, false, false},
                                      {"/v1/completions", Route::kCompletions, true, false},
                                      {"/v1/chat/completions", Route::kChatCompletions, true, false},
                                      {"/tokenize", Route::kTokenize, true, false},
                                      {"/detokenize", Route::kDetokenize, true, false}};
  for (const Known& known : kRoutes) {
    if (known.path != path) continue;
    // The chat page is public like /health: the API key is typed into the page, which sends it.
    if (!known.public_route && !authorized(authorization, context)) {
      return api_error(401, "a valid API key is required (Authorization: Bearer KEY)");
    }
    if (known.post ? !post : !get) {
      return api_error(405, std::string(method) + " is not allowed on " + std::string(path));
    }
    return known.route;
  }
  return api_error(404, "no route for " + std::string(method) + " " + std::string(path));
}

ApiResult handle_route(Route route, std::string_view body, const ApiContext& context) {
  switch (route) {
    case Route::kHealth: return ApiResponse{200, "text/plain", ""};
    case Route::kChatPage: return ApiResponse{200, "text/html; charset=utf-8", std::string(chat_page_html())};
    case Route::kModels: return ApiResponse{200, "application/json", models_body(context.model.name, context.created)};
    case Route::kMetrics:
      if (context.worker == nullptr) return api_error(503, "no engine behind this server");
      return ApiResponse{200, "text/plain; version=0.0.4; charset=utf-8",
                         prometheus_metrics_text(context.worker->metrics(), context.model.name)};
    case Route::kCompletions:
      return generation<CompletionRequest>(body, context, parse_completion_request, plan_completion);
    case Route::kChatCompletions:
      return generation<ChatCompletionRequest>(body, context, parse_chat_completion_request, plan_chat_completion);
    case Route::kTokenize: return handle_tokenize(body, context.model);
    case Route::kDetokenize: return handle_detokenize(body, context.model);
  }
  return api_error(500, "unrouted request");
}

ApiResult handle_api_request(const ApiRequest& request, const ApiContext& context) {
  std::variant<Route, ApiResponse> routed =
      route_request(request.method, request.target, request.authorization, context);
  if (auto* response = std::get_if<ApiResponse>(&routed)) return std::move(*response);
  return handle_route(std::get<Route>(routed), request.body, context);
}

}  // namespace folio::server
