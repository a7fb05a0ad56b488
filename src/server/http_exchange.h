// What a connection decides about one HTTP/1.1 exchange, apart from the socket, so that the
// session and the whole-request fuzzer (fuzz/http_request_fuzz.cpp) share every rule: framing
// checks on a request's header (RFC 9112 section 6), and responses written by Beast's own
// serializer (status line, Content-Length or chunked framing, Connection, and HEAD's header
// without a body).
#pragma once

#include <boost/beast/http.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "server/api_routes.h"

namespace folio::server {

using RequestHeader = boost::beast::http::request_header<>;

// A request the server must answer with 400 and then close (RFC 9112 6.1 and 6.3): a
// Transfer-Encoding other than exactly "chunked" (its final coding must be chunked, and folio
// decodes no other coding), or Transfer-Encoding and Content-Length together (a smuggling
// vector). Beast's parser itself refuses malformed lengths and chunk sizes.
std::optional<std::string> framing_error(const RequestHeader& header);

// Whether a body follows the header (Content-Length > 0, or chunked).
bool has_body(const RequestHeader& header);

// The whole response. head: the header only, its Content-Length the body's that GET would have.
std::string serialize_response(const ApiResponse& response, unsigned version, bool keep_alive, bool head);

// A streamed (SSE) response's header: chunked on HTTP/1.1, else raw until the connection closes.
std::string serialize_stream_header(unsigned version, bool keep_alive);
// One chunk of a chunked body, and the last (empty) one.
std::string serialize_chunk(std::string_view data);
std::string serialize_last_chunk();

}  // namespace folio::server
