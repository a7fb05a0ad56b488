#include "server/http_server.h"

#include <pthread.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <csignal>
#include <cstdio>
#include <thread>
#include <vector>

namespace folio::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;

struct HttpServer::Impl {
  Impl(const ApiContext& context, const HttpLimits& limits)
      : context(context),
        limits(limits),
        planner(limits.planner_threads, limits.max_planning, limits.max_planning_bytes),
        acceptor(io),
        signals(io, SIGINT, SIGTERM),
        retry_timer(io) {}

  void accept() {
    acceptor.async_accept(net::make_strand(io), [this](boost::system::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      if (ec) {
        // Out of file descriptors and the like: wait a little rather than spin.
        std::fprintf(stderr, "folio serve: accept failed: %s\n", ec.message().c_str());
        retry_timer.expires_after(std::chrono::milliseconds(100));
        retry_timer.async_wait([this](boost::system::error_code) { accept(); });
        return;
      }
      socket.set_option(tcp::no_delay(true), ec);  // SSE events are small and latency matters
      std::make_shared<HttpSession>(std::move(socket), context, limits, planner)->start();
      accept();
    });
  }

  // On the io_context: stop accepting, let the owner abort what is in flight, stop the threads.
  void shut_down() {
    boost::system::error_code ignored;
    acceptor.close(ignored);
    signals.cancel(ignored);
    if (on_stop) on_stop();
    on_stop = nullptr;
    io.stop();
  }

  const ApiContext& context;
  HttpLimits limits;
  std::function<void()> on_stop;
  net::io_context io;
  // After io, so destroyed (joined) first: a plan finishing then still posts to a live context.
  PlannerPool planner;
  tcp::acceptor acceptor;
  net::signal_set signals;
  net::steady_timer retry_timer;
};

HttpServer::HttpServer(const ApiContext& context, const HttpLimits& limits)
    : impl_(std::make_unique<Impl>(context, limits)) {}

HttpServer::~HttpServer() = default;

Status HttpServer::listen(const std::string& host, uint16_t port) {
  boost::system::error_code ec;
  const net::ip::address address = net::ip::make_address(host, ec);
  if (ec) return Status::error("'" + host + "' is not an IP address");
  const tcp::endpoint endpoint(address, port);
  tcp::acceptor& acceptor = impl_->acceptor;
  if (acceptor.open(endpoint.protocol(), ec); ec) return Status::error("cannot open a socket: " + ec.message());
  acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (acceptor.bind(endpoint, ec); ec) {
    return Status::error("cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message());
  }
  if (acceptor.listen(net::socket_base::max_listen_connections, ec); ec) {
    return Status::error("cannot listen: " + ec.message());
  }
  return Status::ok();
}

uint16_t HttpServer::port() const {
  return impl_->acceptor.local_endpoint().port();
}

void HttpServer::run(int num_threads, const std::function<void()>& on_stop) {
  impl_->on_stop = on_stop;
  impl_->signals.async_wait([this](boost::system::error_code ec, int) {
    if (!ec) impl_->shut_down();
  });
  impl_->accept();
  std::vector<std::thread> threads;
  for (int i = 1; i < num_threads; ++i) {
    threads.emplace_back([this] {
      pthread_setname_np(pthread_self(), "folio-io");
      impl_->io.run();
    });
  }
  impl_->io.run();
  for (std::thread& t : threads) t.join();
}

void HttpServer::stop() {
  net::post(impl_->io, [this] { impl_->shut_down(); });
}

}  // namespace folio::server
