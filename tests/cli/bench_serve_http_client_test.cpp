// HttpClient against a scripted server on a loopback socket: chunked bodies cut inside events,
// error statuses, refused connections, timeouts and streams that break off. The server side is
// plain POSIX sockets, so that the client is not tested against its own library.
#ifdef FOLIO_HAS_SERVER
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cli/bench_serve_http_client.h"

namespace folio::cli {
namespace {

// Accepts connections on 127.0.0.1 and answers each, after reading its request, with `reply`.
class ScriptedServer {
 public:
  using Reply = std::function<void(int fd, const std::string& request)>;

  explicit ScriptedServer(Reply reply) : reply_(std::move(reply)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(listen_fd_, 64), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  ~ScriptedServer() {
    stopping_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::close(listen_fd_);
    acceptor_.join();
    for (std::thread& t : connections_) t.join();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int num_accepted() const { return accepted_; }

 private:
  void accept_loop() {
    while (!stopping_) {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      ++accepted_;
      connections_.emplace_back([this, fd] {
        const std::string request = read_request(fd);
        reply_(fd, request);
        ::close(fd);
      });
    }
  }

  static std::string read_request(int fd) {
    std::string data;
    char buffer[4096];
    size_t body_start = std::string::npos;
    size_t content_length = 0;
    while (true) {
      if (body_start == std::string::npos) {
        body_start = data.find("\r\n\r\n");
        if (body_start != std::string::npos) {
          body_start += 4;
          const size_t at = data.find("Content-Length: ");
          if (at != std::string::npos && at < body_start) content_length = std::stoul(data.substr(at + 16));
        }
      }
      if (body_start != std::string::npos && data.size() >= body_start + content_length) return data;
      const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) return data;
      data.append(buffer, static_cast<size_t>(n));
    }
  }

  Reply reply_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::thread acceptor_;
  std::vector<std::thread> connections_;  // touched only by the acceptor thread until the join
};

void send_all(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

std::string http_chunk(const std::string& data) {
  char size[16];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  return size + data + "\r\n";
}

void pause_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

struct Collected {
  std::vector<std::string> events;
  std::vector<HttpClient::Clock::time_point> arrivals;
  std::optional<HttpOutcome> outcome;
};

void stream(HttpClient& client, Collected& into, double timeout_s = 10.0) {
  client.post_events(
      "/v1/completions", R"({"prompt":"x"})", timeout_s,
      [&into](std::string_view data, HttpClient::Clock::time_point at) {
        into.events.emplace_back(data);
        into.arrivals.push_back(at);
      },
      [&into](HttpOutcome outcome) { into.outcome = std::move(outcome); });
}

TEST(BaseUrl, Parses) {
  BaseUrl url = parse_base_url("http://127.0.0.1:8080").value();
  EXPECT_EQ(url.host, "127.0.0.1");
  EXPECT_EQ(url.port, "8080");
  EXPECT_EQ(url.path_prefix, "");
  url = parse_base_url("http://localhost/api/").value();
  EXPECT_EQ(url.host, "localhost");
  EXPECT_EQ(url.port, "80");
  EXPECT_EQ(url.path_prefix, "/api");
  url = parse_base_url("HTTP://[::1]:9000/x").value();
  EXPECT_EQ(url.host, "::1");
  EXPECT_EQ(url.port, "9000");
  EXPECT_EQ(url.path_prefix, "/x");
  EXPECT_EQ(parse_base_url("example.com:81").value().port, "81");  // no scheme: http
  EXPECT_NE(parse_base_url("https://a.b").error().find("https"), std::string::npos);
  for (const char* bad : {"ftp://a", "http://", "http://:80", "http://a:0", "http://a:65536", "http://a:8x",
                          "http://u@a", "http://[::1"}) {
    EXPECT_FALSE(parse_base_url(bad).has_value()) << bad;
  }
}

TEST(HttpClient, ChunkedEventsCutAnywhereArriveWhole) {
  ScriptedServer server([](int fd, const std::string& request) {
    EXPECT_NE(request.find("POST /v1/completions HTTP/1.1"), std::string::npos);
    EXPECT_NE(request.find("{\"prompt\":\"x\"}"), std::string::npos);
    send_all(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
    // HTTP chunks that end inside an event, inside "data:", inside a CRLF.
    for (const std::string piece :
         {"data: {\"a\":", "1}\n\nda", "ta: {\"a\":2}\r", "\n\r\n: ping\n\n", "data: [DONE]\n\n"}) {
      send_all(fd, http_chunk(piece));
      pause_ms(20);
    }
    send_all(fd, "0\r\n\r\n");
  });
  HttpClient client(parse_base_url(server.url()).value(), "");
  Collected got;
  stream(client, got);
  client.run();
  ASSERT_TRUE(got.outcome.has_value());
  EXPECT_TRUE(got.outcome->ok()) << got.outcome->error;
  EXPECT_EQ(got.outcome->status, 200);
  EXPECT_EQ(got.events, (std::vector<std::string>{"{\"a\":1}", "{\"a\":2}", "[DONE]"}));
  // Each event is stamped when its last byte came, not when the stream ended.
  ASSERT_EQ(got.arrivals.size(), 3u);
  EXPECT_GE(got.arrivals[2] - got.arrivals[0], std::chrono::milliseconds(40));
}

TEST(HttpClient, ABodyWithoutChunkingIsReadToItsLength) {
  ScriptedServer server([](int fd, const std::string&) {
    const std::string body = "data: one\n\ndata: two\n\n";
    send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body.substr(0, 7));
    pause_ms(10);
    send_all(fd, body.substr(7));
  });
  HttpClient client(parse_base_url(server.url()).value(), "");
  Collected got;
  stream(client, got);
  client.run();
  EXPECT_TRUE(got.outcome->ok()) << got.outcome->error;
  EXPECT_EQ(got.events, (std::vector<std::string>{"one", "two"}));
}

TEST(HttpClient, ErrorStatusKeepsTheBody) {
  ScriptedServer server([](int fd, const std::string& request) {
    EXPECT_NE(request.find("Authorization: Bearer sesame"), std::string::npos);
    const std::string body = R"({"error":{"message":"no such model"}})";
    send_all(fd, "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n" + body);
  });
  HttpClient client(parse_base_url(server.url()).value(), "sesame");
  Collected got;
  stream(client, got);
  client.run();
  EXPECT_TRUE(got.events.empty());
  EXPECT_FALSE(got.outcome->ok());
  EXPECT_TRUE(got.outcome->error.empty());
  EXPECT_EQ(got.outcome->status, 404);
  EXPECT_EQ(got.outcome->body, R"({"error":{"message":"no such model"}})");
}

TEST(HttpClient, AStreamThatBreaksOffIsAnError) {
  ScriptedServer server([](int fd, const std::string&) {
    send_all(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + http_chunk("data: a\n\n"));
    // then the connection closes without the last chunk
  });
  HttpClient client(parse_base_url(server.url()).value(), "");
  Collected got;
  stream(client, got);
  client.run();
  EXPECT_EQ(got.events, std::vector<std::string>{"a"});
  EXPECT_EQ(got.outcome->status, 200);
  EXPECT_NE(got.outcome->error.find("closed the connection"), std::string::npos) << got.outcome->error;
}

TEST(HttpClient, ASilentServerTimesOut) {
  ScriptedServer server([](int, const std::string&) { pause_ms(600); });
  HttpClient client(parse_base_url(server.url()).value(), "");
  Collected got;
  const auto start = HttpClient::Clock::now();
  stream(client, got, 0.2);
  client.run();
  EXPECT_LT(HttpClient::Clock::now() - start, std::chrono::milliseconds(550));
  EXPECT_NE(got.outcome->error.find("no complete response within 0.2 s"), std::string::npos) << got.outcome->error;
}

TEST(HttpClient, NoServerIsAnErrorNotACrash) {
  uint16_t port = 0;
  {
    ScriptedServer gone([](int, const std::string&) {});
    port = static_cast<uint16_t>(std::stoi(gone.url().substr(gone.url().rfind(':') + 1)));
  }
  HttpClient client(parse_base_url("http://127.0.0.1:" + std::to_string(port)).value(), "");
  Collected got;
  std::optional<HttpOutcome> models;
  stream(client, got);
  client.get("/v1/models", 5.0, [&models](HttpOutcome o) { models = std::move(o); });
  client.run();
  EXPECT_NE(got.outcome->error.find("connect"), std::string::npos) << got.outcome->error;
  EXPECT_EQ(got.outcome->status, 0);
  EXPECT_NE(models->error.find("connect"), std::string::npos);
}

TEST(HttpClient, ManyExchangesAtOnceOnOneThread) {
  // Every reply waits for 16 connections to be open at once: only a client that keeps them
  // all in flight together gets its answers.
  std::atomic<int> open{0};
  ScriptedServer server([&open](int fd, const std::string&) {
    ++open;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (open < 16 && std::chrono::steady_clock::now() < deadline) pause_ms(1);
    send_all(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + http_chunk("data: ok\n\n") + "0\r\n\r\n");
  });
  HttpClient client(parse_base_url(server.url()).value(), "");
  std::vector<Collected> got(16);
  for (Collected& c : got) stream(client, c);
  const auto start = HttpClient::Clock::now();
  client.run();
  EXPECT_LT(HttpClient::Clock::now() - start, std::chrono::seconds(4));
  for (const Collected& c : got) {
    EXPECT_TRUE(c.outcome->ok()) << c.outcome->error;
    EXPECT_EQ(c.events, std::vector<std::string>{"ok"});
  }
}

TEST(HttpClient, TimersRunInOrderOnTheClientThread) {
  HttpClient client(parse_base_url("http://127.0.0.1:1").value(), "");
  std::vector<int> order;
  const auto now = HttpClient::Clock::now();
  client.call_at(now + std::chrono::milliseconds(30), [&] { order.push_back(2); });
  client.call_at(now + std::chrono::milliseconds(10), [&] { order.push_back(1); });
  client.call_at(now - std::chrono::seconds(1), [&] { order.push_back(0); });
  client.run();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace folio::cli
#endif  // FOLIO_HAS_SERVER
