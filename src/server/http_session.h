// HttpSession: one client connection, driven by async operations on its own strand (no thread
// of its own, so an idle connection costs only memory).
//
//   read request (header/body timeout, body limit -> 413)
//     -> handle_api_request: a whole response -> write -> next request (keep-alive) or close
//                            a generation      -> EngineWorker::submit, outputs posted back
//                                                 here, written as they come (SSE) or at the end
// While a generation runs, a read stays pending on the socket: when it fails, the client is
// gone and the request is cancelled at once, freeing its KV blocks. Bytes it reads (a
// pipelined next request) stay in the buffer for the next parse.
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

namespace folio::server {

struct HttpLimits {
  size_t max_body_bytes = size_t{8} << 20;  // larger bodies get 413
  size_t max_header_bytes = size_t{64} << 10;
  std::chrono::seconds read_timeout{30};              // a whole request, and an idle keep-alive wait
  size_t max_pending_write_bytes = size_t{16} << 20;  // a client this far behind is dropped
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(boost::asio::ip::tcp::socket&& socket, const ApiContext& context, const HttpLimits& limits);
  void start();

 private:
  // kResponding: a response (maybe a generation) is under way; kAwaitingWatch: it is out and
  // the disconnect watch is being cancelled before the next read.
  // kLingering: a closing response is out; the client's leftover input is being discarded.
  enum class State { kReading, kResponding, kAwaitingWatch, kLingering, kClosed };

  void do_read();
  void on_read(boost::beast::error_code ec);
  void handle_request();
  void start_generation(GenerationPlan plan);
  void on_output(ServedOutput out);
  void on_rejected(const Status& status);
  void start_watch();
  void on_watch(boost::beast::error_code ec, size_t bytes);
  void send_response(const ApiResponse& response, bool close_after);
  void queue_write(std::string bytes, bool ends_response);
  void do_write();
  void on_write(boost::beast::error_code ec);
  void response_complete();
  void client_gone();
  void linger_then_close();
  void drain();
  void close();

  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  const ApiContext& context_;
  HttpLimits limits_;
  State state_ = State::kReading;
  bool keep_alive_ = true;
  bool chunked_ = true;        // HTTP/1.1: SSE in chunked encoding; 1.0: raw until close
  bool watching_ = false;      // the disconnect-watching read is pending
  bool headers_sent_ = false;  // streaming: the SSE header went out
  std::optional<ResponseAssembler> assembler_;
  std::optional<uint64_t> ticket_;  // the request in the engine, until its last output

  struct PendingWrite {
    std::string bytes;
    bool ends_response;
  };
  std::deque<PendingWrite> writes_;
  size_t pending_write_bytes_ = 0;
  bool writing_ = false;
  std::vector<char> drain_buffer_;  // lingering only
};

}  // namespace folio::server
