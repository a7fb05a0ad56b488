// HttpServer: the listening socket and the io_context its connections run on. A few threads
// run the context; connections are async (HttpSession), so their number is bounded by memory
// and file descriptors, not threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "server/api_routes.h"
#include "server/http_session.h"

namespace folio::server {

class HttpServer {
 public:
  HttpServer(const ApiContext& context, const HttpLimits& limits);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens; port 0 picks a free one (see port()).
  Status listen(const std::string& host, uint16_t port);
  uint16_t port() const;

  // Serves until SIGINT/SIGTERM or stop(): then stops accepting, runs on_stop (which should
  // abort what is in flight) and returns once the io threads have finished.
  void run(int num_threads, const std::function<void()>& on_stop);
  void stop();  // any thread

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace folio::server
