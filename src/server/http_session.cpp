#include "server/http_session.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <sstream>

#include "server/http_exchange.h"

namespace folio::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

constexpr size_t kWatchReadBytes = 4096;

}  // namespace

HttpSession::HttpSession(net::ip::tcp::socket&& socket, const ApiContext& context, const HttpLimits& limits,
                         PlannerPool& planner)
    : stream_(std::move(socket)), context_(context), limits_(limits), planner_(planner) {}

void HttpSession::start() {
  // Everything of this session runs on its strand, starting here.
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->do_read(); });
}

void HttpSession::do_read() {
  state_ = State::kReading;
  head_ = false;
  body_parser_.reset();
  header_parser_.emplace();
  header_parser_->header_limit(static_cast<std::uint32_t>(limits_.max_header_bytes));
  header_parser_->body_limit(limits_.max_body_bytes);
  stream_.expires_after(limits_.read_timeout);
  http::async_read_header(stream_, buffer_, *header_parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

bool HttpSession::respond_to_read_error(beast::error_code ec) {
  if (ec == http::error::body_limit) {
    send_response(
        api_error(413, "the request body is larger than " + std::to_string(limits_.max_body_bytes) + " bytes"),
        /*close_after=*/true);
    return true;
  }
  if (ec == http::error::header_limit) {
    send_response(api_error(431, "the request headers are too large"), /*close_after=*/true);
    return true;
  }
  if (ec.category() == http::make_error_code(http::error::bad_target).category() && ec != http::error::end_of_stream &&
      ec != http::error::partial_message) {
    send_response(api_error(400, "malformed HTTP request: " + ec.message()), /*close_after=*/true);
    return true;
  }
  return false;  // closed, reset or timed out: nobody to answer
}

void HttpSession::on_header(beast::error_code ec) {
  if (state_ == State::kClosed) return;
  if (ec) {
    if (!respond_to_read_error(ec)) close();
    return;
  }
  const auto& header = header_parser_->get();  // the message: header fields, keep_alive()
  version_ = header.version();
  keep_alive_ = header.keep_alive();
  head_ = header.method() == http::verb::head;
  if (std::optional<std::string> error = framing_error(header)) {
    send_response(api_error(400, *error), /*close_after=*/true);  // RFC 9112 6.1: and close
    return;
  }
  std::variant<Route, ApiResponse> routed =
      route_request(header.method_string(), header.target(), header[http::field::authorization], context_);
  if (auto* response = std::get_if<ApiResponse>(&routed)) {
    // Answered from the header alone: a body that was coming is not read, so the connection
    // cannot carry another request after it.
    send_response(*response, /*close_after=*/has_body(header) || !keep_alive_);
    return;
  }
  route_ = std::get<Route>(routed);
  if (!has_body(header)) {
    const bool cheap =
        route_ == Route::kHealth || route_ == Route::kChatPage || route_ == Route::kModels || route_ == Route::kMetrics;
    if (cheap) {
      on_planned(handle_route(route_, {}, context_));  // nothing to parse: answered here
    } else {
      plan(std::string());
    }
    return;
  }
  if (beast::iequals(header[http::field::expect], "100-continue")) {
    // The client waits for this before it sends the body it announced.
    http::response<http::empty_body> proceed{http::status::continue_, version_};
    auto bytes = std::make_shared<std::string>();
    std::ostringstream out;
    out << proceed;
    *bytes = out.str();
    net::async_write(stream_.socket(), net::buffer(*bytes),
                     [self = shared_from_this(), bytes](beast::error_code write_ec, size_t) {
                       if (write_ec) {
                         self->close();
                         return;
                       }
                       self->read_body();
                     });
    return;
  }
  read_body();
}

void HttpSession::read_body() {
  if (state_ == State::kClosed) return;
  body_parser_.emplace(std::move(*header_parser_));
  body_parser_->body_limit(limits_.max_body_bytes);
  http::async_read(stream_, buffer_, *body_parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
}

void HttpSession::on_body(beast::error_code ec) {
  if (state_ == State::kClosed) return;
  if (ec) {
    if (!respond_to_read_error(ec)) close();
    return;
  }
  plan(std::move(body_parser_->get().body()));
}

void HttpSession::plan(std::string body) {
  state_ = State::kPlanning;
  stream_.expires_never();  // planning and generating take as long as they take
  auto self = shared_from_this();
  const size_t bytes = body.size();
  const bool posted = planner_.try_post(
      [self, body = std::move(body)] {
        ApiResult result = handle_route(self->route_, body, self->context_);
        net::post(self->stream_.get_executor(),
                  [self, result = std::move(result)]() mutable { self->on_planned(std::move(result)); });
      },
      bytes);
  if (!posted) {
    send_response(api_error(503, "the server is at capacity: too many requests are being prepared; retry later"),
                  /*close_after=*/!keep_alive_);
  }
}

void HttpSession::on_planned(ApiResult result) {
  if (state_ == State::kClosed) return;
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
  const bool chunked = version_ >= 11;
  if (!headers_sent_) {
    headers_sent_ = true;
    if (!chunked) keep_alive_ = false;  // HTTP/1.0: the end of the stream is the end of the connection
    queue_write(serialize_stream_header(version_, keep_alive_), false, false);
  }
  if (!events.empty()) queue_write(chunked ? serialize_chunk(events) : std::move(events), false, true);
  if (done) {
    queue_write(chunked ? serialize_last_chunk() : std::string(), true, false);
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
  if (input_ended_) return;  // nothing more will come
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
    if (ec == net::error::eof) {
      // A half-close after a complete request: the client still reads. Finish the response,
      // then close, as no other request can follow.
      input_ended_ = true;
      keep_alive_ = false;
      return;
    }
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
  if (close_after || input_ended_) keep_alive_ = false;
  std::string bytes;
  if (response.body.size() > limits_.max_response_bytes) {
    bytes =
        serialize_response(api_error(413, "the response would be " + std::to_string(response.body.size()) +
                                              " bytes, more than this server's limit of " +
                                              std::to_string(limits_.max_response_bytes) + "; ask for less at a time"),
                           version_, keep_alive_, head_);
  } else {
    bytes = serialize_response(response, version_, keep_alive_, head_);
  }
  if (state_ == State::kReading || state_ == State::kPlanning) state_ = State::kResponding;
  queue_write(std::move(bytes), true, false);
}

void HttpSession::queue_write(std::string bytes, bool ends_response, bool stream_data) {
  if (stream_data) pending_stream_bytes_ += bytes.size();
  writes_.push_back({std::move(bytes), ends_response});
  if (pending_stream_bytes_ > limits_.max_pending_write_bytes) {
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
  const size_t written = writes_.front().bytes.size();
  pending_stream_bytes_ -= std::min(pending_stream_bytes_, written);
  writes_.pop_front();
  if (ends_response) {
    response_complete();
    return;
  }
  if (!writes_.empty()) do_write();
}

void HttpSession::response_complete() {
  if (!keep_alive_) {
    if (watching_ || input_ended_) {
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
