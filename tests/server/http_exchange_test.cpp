// The framing rules and response serialization a connection applies (server/http_exchange.h),
// and routing from the request line alone (server/api_routes.h).
#include "server/http_exchange.h"

#include <gtest/gtest.h>

namespace folio::server {
namespace {

namespace http = boost::beast::http;

RequestHeader header_with(std::initializer_list<std::pair<http::field, const char*>> fields) {
  RequestHeader h;
  h.method(http::verb::post);
  h.target("/v1/completions");
  h.version(11);
  for (const auto& [name, value] : fields) h.set(name, value);
  return h;
}

TEST(HttpFraming, TransferEncodingMustBeExactlyChunkedAndAlone) {
  EXPECT_FALSE(framing_error(header_with({})));
  EXPECT_FALSE(framing_error(header_with({{http::field::content_length, "10"}})));
  EXPECT_FALSE(framing_error(header_with({{http::field::transfer_encoding, "chunked"}})));
  EXPECT_FALSE(framing_error(header_with({{http::field::transfer_encoding, "Chunked"}})));
  for (const char* te :
       {"identity", "gzip", "chunked, identity", "gzip, chunked", "xchunked", "chunked, chunked", ""}) {
    EXPECT_TRUE(framing_error(header_with({{http::field::transfer_encoding, te}}))) << te;
  }
  EXPECT_TRUE(
      framing_error(header_with({{http::field::transfer_encoding, "chunked"}, {http::field::content_length, "5"}})));
  EXPECT_TRUE(has_body(header_with({{http::field::transfer_encoding, "chunked"}})));
  EXPECT_TRUE(has_body(header_with({{http::field::content_length, "3"}})));
  EXPECT_FALSE(has_body(header_with({{http::field::content_length, "0"}})));
  EXPECT_FALSE(has_body(header_with({})));
}

TEST(HttpResponses, HeadIsTheHeaderOfGetWithoutTheBody) {
  const ApiResponse r{200, "application/json", "{\"object\": \"list\"}"};
  const std::string get = serialize_response(r, 11, true, false);
  const std::string head = serialize_response(r, 11, true, true);
  EXPECT_EQ(get.substr(0, get.find("\r\n\r\n") + 4), head);
  EXPECT_NE(head.find("Content-Length: 18\r\n"), std::string::npos) << head;
  EXPECT_EQ(get.substr(get.find("\r\n\r\n") + 4), r.body);
  EXPECT_NE(serialize_response(r, 11, false, false).find("Connection: close"), std::string::npos);
  EXPECT_EQ(serialize_response(r, 10, true, false).rfind("HTTP/1.0 200", 0), 0u);
}

TEST(HttpResponses, StreamsAreChunkedOnHttp11Only) {
  const std::string h11 = serialize_stream_header(11, true);
  EXPECT_NE(h11.find("Transfer-Encoding: chunked"), std::string::npos) << h11;
  EXPECT_NE(h11.find("text/event-stream"), std::string::npos);
  EXPECT_EQ(h11.substr(h11.size() - 4), "\r\n\r\n");
  EXPECT_EQ(serialize_stream_header(10, false).find("chunked"), std::string::npos);
  EXPECT_EQ(serialize_chunk("hello"), "5\r\nhello\r\n");
  EXPECT_EQ(serialize_last_chunk(), "0\r\n\r\n");
}

TEST(ApiRouting, DecidedFromTheRequestLineAndTheKey) {
  ApiContext context;
  context.api_key = "secret";
  auto status = [&](const char* method, const char* target, const char* auth) {
    auto routed = route_request(method, target, auth, context);
    return std::holds_alternative<Route>(routed) ? 0 : std::get<ApiResponse>(routed).status;
  };
  EXPECT_EQ(status("GET", "/health", ""), 0);
  EXPECT_EQ(status("HEAD", "/health", ""), 0);
  EXPECT_EQ(status("GET", "/", ""), 0);
  EXPECT_EQ(status("POST", "/v1/completions", ""), 401);
  EXPECT_EQ(status("POST", "/v1/completions", "Bearer wrong"), 401);
  EXPECT_EQ(status("POST", "/v1/completions", "Bearer secret"), 0);
  EXPECT_EQ(status("GET", "/v1/completions", "Bearer secret"), 405);
  EXPECT_EQ(status("HEAD", "/v1/models?x=1", "Bearer secret"), 0);
  EXPECT_EQ(status("POST", "/nowhere", "Bearer secret"), 404);
  EXPECT_EQ(status("POST", "/nowhere", ""), 404);
  context.api_key.clear();
  EXPECT_EQ(status("POST", "/tokenize", ""), 0);
  EXPECT_EQ(std::get<Route>(route_request("POST", "/v1/chat/completions", "", context)), Route::kChatCompletions);
}

}  // namespace
}  // namespace folio::server
