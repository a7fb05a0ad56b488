// HttpSession: one client connection, driven by async operations on its own strand (no thread
// of its own, so an idle connection costs only memory).
//
//   read the header (timeout, header limit -> 431)
//     framing (http_exchange: a Transfer-Encoding other than chunked, or it with
//     Content-Length -> 400 and close); routing from the request line and the API key alone
//     (401 / 404 / 405 before any body is read; the connection closes if a body was coming)
//   read the body (Expect: 100-continue answered first; body limit -> 413)
//   plan it on the planner pool (parse, tokenize, chat template: off the io threads)
//     -> a whole response (Beast-serialized; HEAD gets the header only) -> next request or close
//     -> a generation -> EngineWorker::submit, outputs posted back here, written as they come
//        (SSE, chunked) or at the end
// While a generation runs, a read stays pending on the socket. An error there (reset) means the
// client is gone: the request is cancelled at once, freeing its KV blocks. End of input
// (a client that half-closed after sending its request) is not: the response is finished and
// the connection then closed. Bytes it reads (a pipelined next request) stay in the buffer.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/api_routes.h"
#include "server/openai_response.h"
#include "server/planner_pool.h"

namespace folio::server {

struct HttpLimits {
  size_t max_body_bytes = size_t{8} << 20;  // larger bodies get 413
  size_t max_header_bytes = size_t{64} << 10;
  std::chrono::seconds read_timeout{30};              // a whole request, and an idle keep-alive wait
  size_t max_pending_write_bytes = size_t{16} << 20;  // a stream's client this far behind is dropped
  size_t max_response_bytes = size_t{64} << 20;       // a larger whole response becomes a 413
  int planner_threads = 2;                            // parsing and tokenizing requests
  // Requests being planned at once, and their bodies' bytes; past either: 503. 256 MiB of
  // bodies is 32 maximal ones, or thousands of ordinary ones.
  int max_planning = 4096;
  size_t max_planning_bytes = size_t{256} << 20;
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(boost::asio::ip::tcp::socket&& socket, const ApiContext& context, const HttpLimits& limits,
              PlannerPool& planner);
  void start();

 private:
  // kPlanning: the request is on the planner pool. kResponding: a response (maybe a
  // generation) is under way; kAwaitingWatch: it is out and the disconnect watch is being
  // cancelled before the next read. kLingering: a closing response is out; the client's
  // leftover input is being discarded.
  enum class State { kReading, kPlanning, kResponding, kAwaitingWatch, kLingering, kClosed };

  void do_read();
  void on_header(boost::beast::error_code ec);
  void read_body();
  void on_body(boost::beast::error_code ec);
  // The error of a failed read, as the response that ends the connection; false: just close.
  bool respond_to_read_error(boost::beast::error_code ec);
  void plan(std::string body);
  void on_planned(ApiResult result);
  void start_generation(GenerationPlan plan);
  void on_output(ServedOutput out);
  void on_rejected(const Status& status);
  void start_watch();
  void on_watch(boost::beast::error_code ec, size_t bytes);
  void send_response(const ApiResponse& response, bool close_after);
  // stream_data: a chunk of a streamed response, bounded by max_pending_write_bytes.
  void queue_write(std::string bytes, bool ends_response, bool stream_data);
  void do_write();
  void on_write(boost::beast::error_code ec);
  void response_complete();
  void client_gone();
  void linger_then_close();
  void drain();
  void close();

  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::empty_body>> header_parser_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> body_parser_;
  const ApiContext& context_;
  HttpLimits limits_;
  PlannerPool& planner_;
  State state_ = State::kReading;
  Route route_ = Route::kHealth;
  unsigned version_ = 11;
  bool head_ = false;  // HEAD: the response's header only
  bool keep_alive_ = true;
  bool watching_ = false;      // the disconnect-watching read is pending
  bool input_ended_ = false;   // the client half-closed: respond, then close
  bool headers_sent_ = false;  // streaming: the SSE header went out
  std::optional<ResponseAssembler> assembler_;
  std::optional<uint64_t> ticket_;  // the request in the engine, until its last output

  struct PendingWrite {
    std::string bytes;
    bool ends_response;
  };
  std::deque<PendingWrite> writes_;
  size_t pending_stream_bytes_ = 0;
  bool writing_ = false;
  std::vector<char> drain_buffer_;  // lingering only
};

}  // namespace folio::server
