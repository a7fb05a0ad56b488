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

bool authorized(const ApiRequest& request, const ApiContext& context) {
  if (context.api_key.empty()) return true;
  constexpr std::string_view kBearer = "Bearer ";
  if (request.authorization.substr(0, kBearer.size()) != kBearer) return false;
  return same_secret(request.authorization.substr(kBearer.size()), context.api_key);
}

// Names the model a request asked for when it is not the one served (a 404).
std::optional<std::string> unknown_model(const std::string& asked, const ApiContext& context) {
  if (asked.empty() || asked == context.model.name) return std::nullopt;
  return "the model '" + asked + "' does not exist; this server serves '" + context.model.name + "'";
}

template <typename Request, typename Parse, typename Plan>
ApiResult generation(const ApiRequest& request, const ApiContext& context, Parse parse, Plan plan) {
  Expected<Request> parsed = parse(request.body);
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

ApiResult handle_api_request(const ApiRequest& request, const ApiContext& context) {
  const std::string_view path = path_of(request.target);
  const bool get = request.method == "GET";
  const bool post = request.method == "POST";
  if (path == "/health" && get) return ApiResponse{200, "text/plain", ""};
  // The chat page is public like /health: the API key is typed into the page, which sends it.
  if ((path == "/" || path == "/index.html") && get) {
    return ApiResponse{200, "text/html; charset=utf-8", std::string(chat_page_html())};
  }
  const bool known = path == "/v1/models" || path == "/metrics" || path == "/v1/completions" ||
                     path == "/v1/chat/completions" || path == "/health" || path == "/tokenize" ||
                     path == "/detokenize";
  if (!known) return api_error(404, "no route for " + std::string(request.method) + " " + std::string(path));
  if (!authorized(request, context)) return api_error(401, "a valid API key is required (Authorization: Bearer KEY)");
  if (path == "/v1/models" && get)
    return ApiResponse{200, "application/json", models_body(context.model.name, context.created)};
  if (path == "/metrics" && get) {
    return ApiResponse{200, "text/plain; version=0.0.4; charset=utf-8",
                       prometheus_metrics_text(context.worker->metrics(), context.model.name)};
  }
  if (path == "/v1/completions" && post) {
    return generation<CompletionRequest>(request, context, parse_completion_request, plan_completion);
  }
  if (path == "/v1/chat/completions" && post) {
    return generation<ChatCompletionRequest>(request, context, parse_chat_completion_request, plan_chat_completion);
  }
  if (path == "/tokenize" && post) return handle_tokenize(request.body, context.model);
  if (path == "/detokenize" && post) return handle_detokenize(request.body, context.model);
  return api_error(405, std::string(request.method) + " is not allowed on " + std::string(path));
}

}  // namespace folio::server
