#include "server/http_exchange.h"

#include <boost/beast/core/buffers_to_string.hpp>
#include <sstream>

namespace folio::server {

namespace beast = boost::beast;
namespace http = beast::http;

std::optional<std::string> framing_error(const RequestHeader& header) {
  const auto te = header.find(http::field::transfer_encoding);
  if (te == header.end()) return std::nullopt;
  if (header.find(http::field::content_length) != header.end()) {
    return std::string("the request has both Transfer-Encoding and Content-Length");
  }
  // Exactly one coding, chunked (RFC 9112 7: chunked must be the final coding, and folio
  // implements no other).
  const http::token_list codings(te->value());
  int count = 0;
  bool chunked = false;
  for (const auto& coding : codings) {
    ++count;
    chunked = beast::iequals(coding, "chunked");
  }
  if (count != 1 || !chunked) {
    return "unsupported Transfer-Encoding '" + std::string(te->value()) + "' (only 'chunked' is accepted)";
  }
  return std::nullopt;
}

bool has_body(const RequestHeader& header) {
  if (header.find(http::field::transfer_encoding) != header.end()) return true;
  const auto length = header.find(http::field::content_length);
  return length != header.end() && length->value() != "0";
}

namespace {

template <typename Message>
std::string to_bytes(const Message& message) {
  std::ostringstream out;
  out << message;  // Beast's serializer
  return out.str();
}

template <typename Message>
void set_common(Message& message, const std::string& content_type, bool keep_alive) {
  message.set(http::field::server, "folio");
  if (!content_type.empty()) message.set(http::field::content_type, content_type);
  message.keep_alive(keep_alive);
}

}  // namespace

std::string serialize_response(const ApiResponse& response, unsigned version, bool keep_alive, bool head) {
  const auto status = static_cast<http::status>(response.status);
  if (head) {
    http::response<http::empty_body> message{status, version};
    set_common(message, response.content_type, keep_alive);
    message.content_length(response.body.size());
    return to_bytes(message);
  }
  http::response<http::string_body> message{status, version};
  set_common(message, response.content_type, keep_alive);
  message.body() = response.body;
  message.prepare_payload();
  return to_bytes(message);
}

std::string serialize_stream_header(unsigned version, bool keep_alive) {
  http::response<http::empty_body> message{http::status::ok, version};
  set_common(message, "text/event-stream", keep_alive);
  message.set(http::field::cache_control, "no-cache");
  if (version >= 11) message.chunked(true);
  // A header serialized alone: Beast writes the fields and the blank line, no body.
  http::response_serializer<http::empty_body> serializer(message);
  serializer.split(true);
  std::string bytes;
  beast::error_code ec;
  while (!serializer.is_header_done() && !ec) {
    serializer.next(ec, [&](beast::error_code&, const auto& buffers) {
      bytes += beast::buffers_to_string(buffers);
      serializer.consume(beast::buffer_bytes(buffers));
    });
  }
  return bytes;
}

std::string serialize_chunk(std::string_view data) {
  return beast::buffers_to_string(http::make_chunk(boost::asio::buffer(data.data(), data.size())));
}

std::string serialize_last_chunk() {
  return beast::buffers_to_string(http::make_chunk_last());
}

}  // namespace folio::server
