#include "server/http_session.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <cstdio>

namespace folio::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

constexpr size_t kWatchReadBytes = 4096;

std::string status_line(int status) {
  return "HTTP/1.1 " + std::to_string(status) + " " +
         std::string(http::obsolete_reason(static_cast<http::status>(status))) + "\r\n";
}

std::string chunk(const std::string& data) {
  char size[20];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  return size + data + "\r\n";
}

}  // namespace

HttpSession::HttpSession(net::ip::tcp::socket&& socket, const ApiContext& context, const HttpLimits& limits)
    : stream_(std::move(socket)), context_(context), limits_(limits) {}

void HttpSession::start() {
  // Everything of this session runs on its strand, starting here.
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->do_read(); });
}

void HttpSession::do_read() {
  state_ = State::kReading;
  parser_.emplace();
  parser_->body_limit(limits_.max_body_bytes);
  parser_->header_limit(static_cast<std::uint32_t>(limits_.max_header_bytes));
  stream_.expires_after(limits_.read_timeout);
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
}

void HttpSession::on_read(beast::error_code ec) {
  if (state_ == State::kClosed) return;
  if (ec == http::error::body_limit) {
    send_response(
        api_error(413, "the request body is larger than " + std::to_string(limits_.max_body_bytes) + " bytes"),
        /*close_after=*/true);
    return;
  }
  if (ec == http::error::header_limit) {
    send_response(api_error(431, "the request headers are too large"), /*close_after=*/true);
    return;
  }
  if (ec && ec.category() == http::make_error_code(http::error::bad_target).category() &&
      ec != http::error::end_of_stream && ec != http::error::partial_message) {
    send_response(api_error(400, "malformed HTTP request: " + ec.message()), /*close_after=*/true);
    return;
  }
  if (ec) {  // closed, reset or timed out between requests
    close();
    return;
  }
  handle_request();
}

void HttpSession::handle_request() {
  const http::request<http::string_body>& request = parser_->get();
  keep_alive_ = request.keep_alive();
  chunked_ = request.version() >= 11;
  ApiRequest api{request.method_string(), request.target(), request[http::field::authorization], request.body()};
  ApiResult result = handle_api_request(api, context_);
  if (auto* response = std::get_if<ApiResponse>(&result)) {
    send_response(*response, /*close_after=*/!keep_alive_);
    return;
  }
  start_generation(std::move(std::get<GenerationPlan>(result)));
}

void HttpSession::start_generation(GenerationPlan plan) {
  state_ = State::kResponding;
  headers_sent_ = false;
  assembler_.emplace(plan.identity, context_.model.tokenizer);
  stream_.expires_never();  // a generation takes as long as it takes; disconnects still end it
  // The worker calls these on the engine thread; they only hop onto this session's strand.
  auto self = shared_from_this();
  OutputSink sink;
  sink.on_output = [self](ServedOutput out) {
    net::post(self->stream_.get_executor(),
              [self, out = std::move(out)]() mutable { self->on_output(std::move(out)); });
  };
  sink.on_rejected = [self](Status status) {
    net::post(self->stream_.get_executor(), [self, status = std::move(status)] { self->on_rejected(status); });
  };
  ticket_ = context_.worker->submit(std::move(plan.prompts), std::move(plan.params), std::move(sink));
  if (!ticket_) {
    assembler_.reset();
    send_response(api_error(503, "the server is at capacity: too many requests are waiting; retry later"),
                  /*close_after=*/!keep_alive_);
    return;
  }
  start_watch();
}

void HttpSession::on_output(ServedOutput out) {
  if (state_ != State::kResponding || !assembler_) return;
  std::string events = assembler_->add(out.prompt, out.output);
  const bool done = assembler_->done();
  if (done) ticket_.reset();  // the worker forgets finished requests by itself
  if (!assembler_->identity().stream) {
    if (done) {
      send_response(ApiResponse{200, "application/json", assembler_->body()}, /*close_after=*/!keep_alive_);
      assembler_.reset();
    }
    return;
  }
  if (!headers_sent_) {
    headers_sent_ = true;
    if (!chunked_) keep_alive_ = false;  // HTTP/1.0: the end of the stream is the end of the connection
    std::string header = status_line(200) +
                         "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\nServer: folio\r\n" +
                         (chunked_ ? "Transfer-Encoding: chunked\r\n" : "") +
                         (keep_alive_ ? "Connection: keep-alive\r\n" : "Connection: close\r\n") + "\r\n";
    queue_write(std::move(header), false);
  }
  if (!events.empty()) queue_write(chunked_ ? chunk(events) : std::move(events), false);
  if (done) {
    queue_write(chunked_ ? "0\r\n\r\n" : "", true);
    assembler_.reset();
  }
}

void HttpSession::on_rejected(const Status& status) {
  if (state_ != State::kResponding) return;
  ticket_.reset();
  assembler_.reset();
  send_response(api_error(400, status.message()), /*close_after=*/!keep_alive_);
}

void HttpSession::start_watch() {
  watching_ = true;
  stream_.socket().async_read_some(
      buffer_.prepare(kWatchReadBytes),
      [self = shared_from_this()](beast::error_code ec, size_t bytes) { self->on_watch(ec, bytes); });
}

void HttpSession::on_watch(beast::error_code ec, size_t bytes) {
  watching_ = false;
  if (state_ == State::kClosed) return;
  if (!ec) buffer_.commit(bytes);
  if (state_ == State::kResponding) {
    if (ec) {
      client_gone();
      return;
    }
    // Pipelined bytes: keep them, keep watching while there is room.
    if (buffer_.size() < limits_.max_header_bytes + limits_.max_body_bytes) start_watch();
    return;
  }
  // kAwaitingWatch: the response is out and the watch was cancelled to read the next request.
  if (ec && ec != net::error::operation_aborted) {
    close();
    return;
  }
  do_read();
}

void HttpSession::send_response(const ApiResponse& response, bool close_after) {
  if (close_after) keep_alive_ = false;
  std::string bytes = status_line(response.status) + "Content-Type: " + response.content_type +
                      "\r\nContent-Length: " + std::to_string(response.body.size()) + "\r\nServer: folio\r\n" +
                      (keep_alive_ ? "Connection: keep-alive\r\n" : "Connection: close\r\n") + "\r\n" + response.body;
  if (state_ == State::kReading) state_ = State::kResponding;  // a response is being written
  queue_write(std::move(bytes), true);
}

void HttpSession::queue_write(std::string bytes, bool ends_response) {
  pending_write_bytes_ += bytes.size();
  writes_.push_back({std::move(bytes), ends_response});
  if (pending_write_bytes_ > limits_.max_pending_write_bytes) {
    client_gone();  // not reading what it asked for
    return;
  }
  if (!writing_) do_write();
}

void HttpSession::do_write() {
  writing_ = true;
  net::async_write(stream_.socket(), net::buffer(writes_.front().bytes),
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
}

void HttpSession::on_write(beast::error_code ec) {
  writing_ = false;
  if (state_ == State::kClosed) return;
  if (ec) {
    client_gone();
    return;
  }
  const bool ends_response = writes_.front().ends_response;
  pending_write_bytes_ -= writes_.front().bytes.size();
  writes_.pop_front();
  if (ends_response) {
    response_complete();
    return;
  }
  if (!writes_.empty()) do_write();
}

void HttpSession::response_complete() {
  if (!keep_alive_) {
    if (watching_) {
      close();  // the request was read whole: nothing unread to linger for
    } else {
      linger_then_close();
    }
    return;
  }
  if (watching_) {
    state_ = State::kAwaitingWatch;
    beast::error_code ignored;
    stream_.socket().cancel(ignored);  // on_watch then reads the next request
    return;
  }
  do_read();
}

// Closing a socket with unread input makes the kernel answer with a reset, which can destroy
// the response still on its way (a 413 sent while the client is still uploading its body).
// So: half-close, read and discard what the client still sends for a moment, then close.
void HttpSession::linger_then_close() {
  state_ = State::kLingering;
  beast::error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
  stream_.expires_after(std::chrono::seconds(2));
  drain_buffer_.resize(64 * 1024);
  drain();
}

void HttpSession::drain() {
  stream_.async_read_some(net::buffer(drain_buffer_), [self = shared_from_this()](beast::error_code ec, size_t) {
    if (ec) {
      self->close();
    } else {
      self->drain();
    }
  });
}

void HttpSession::client_gone() {
  if (ticket_) {
    context_.worker->cancel(*ticket_);
    ticket_.reset();
  }
  close();
}

void HttpSession::close() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  if (ticket_) {
    context_.worker->cancel(*ticket_);
    ticket_.reset();
  }
  beast::error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
}

}  // namespace folio::server
