#include "cli/bench_serve_http_client.h"

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cstdio>
#include <optional>
#include <vector>

#include "cli/bench_serve_sse.h"

namespace folio::cli {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

constexpr size_t kMaxKeptBodyBytes = size_t{1} << 20;
constexpr size_t kReadChunkBytes = 16384;

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (const char c : s) {
    if (std::isdigit(static_cast<unsigned char>(c)) == 0) return false;
  }
  return true;
}

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string host_header(const BaseUrl& url) {
  // An IPv6 literal goes back into brackets; the port only when it is not the default.
  const std::string host = url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
  return url.port == "80" ? host : host + ":" + url.port;
}

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", s);
  return text;
}

// One request and its response, on a connection of its own. Owned by the handlers it has
// pending: it lives until the done handler has run.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(net::io_context& io, http::request<http::string_body> request, double timeout_s, bool as_events,
           HttpClient::EventHandler on_event, HttpClient::DoneHandler done)
      : stream_(io),
        request_(std::move(request)),
        timeout_s_(timeout_s),
        want_events_(as_events),
        on_event_(std::move(on_event)),
        done_(std::move(done)) {
    if (timeout_s > 0.0) {
      deadline_ = HttpClient::Clock::now() +
                  std::chrono::duration_cast<HttpClient::Clock::duration>(std::chrono::duration<double>(timeout_s));
    }
  }

  void start(const tcp::resolver::results_type& endpoints) {
    arm_deadline();
    stream_.async_connect(
        endpoints, [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) { self->on_connect(ec); });
  }

 private:
  // The one deadline covers the whole exchange: every operation gets what is left of it.
  void arm_deadline() {
    if (deadline_) {
      stream_.expires_at(*deadline_);
    } else {
      stream_.expires_never();
    }
  }

  void on_connect(beast::error_code ec) {
    if (ec) return fail("connect", ec);
    arm_deadline();
    http::async_write(stream_, request_,
                      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
  }

  void on_write(beast::error_code ec) {
    if (ec) return fail("send", ec);
    parser_.body_limit(boost::none);  // a stream is as long as the generation
    arm_deadline();
    http::async_read_header(stream_, buffer_, parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    if (ec) return fail("read", ec);
    outcome_.status = parser_.get().result_int();
    as_events_ = want_events_ && outcome_.status >= 200 && outcome_.status < 300;
    read_body();
  }

  void read_body() {
    if (parser_.is_done()) return finish();
    parser_.get().body().data = chunk_.data();
    parser_.get().body().size = chunk_.size();
    arm_deadline();
    http::async_read_some(stream_, buffer_, parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
  }

  void on_body(beast::error_code ec) {
    const HttpClient::Clock::time_point arrival = HttpClient::Clock::now();
    if (ec == http::error::need_buffer) ec = {};  // the chunk buffer is full: not an error
    const size_t received = chunk_.size() - parser_.get().body().size;
    take(std::string_view(chunk_.data(), received), arrival);
    if (ec) return fail("read", ec);
    read_body();
  }

  void take(std::string_view bytes, HttpClient::Clock::time_point arrival) {
    if (!as_events_) {
      outcome_.body.append(bytes.substr(0, kMaxKeptBodyBytes - std::min(kMaxKeptBodyBytes, outcome_.body.size())));
      return;
    }
    events_.clear();
    sse_.feed(bytes, events_);
    for (const std::string& data : events_) on_event_(data, arrival);
  }

  void finish() {
    if (as_events_) {
      events_.clear();
      sse_.finish(events_);
      const HttpClient::Clock::time_point now = HttpClient::Clock::now();
      for (const std::string& data : events_) on_event_(data, now);
    }
    end();
  }

  void fail(const char* step, beast::error_code ec) {
    if (ec == beast::error::timeout) {
      outcome_.error = "no complete response within " + seconds_text(timeout_s_) + " s";
    } else if (ec == http::error::end_of_stream || ec == http::error::partial_message || ec == net::error::eof) {
      outcome_.error = std::string(step) + ": the server closed the connection before the response ended";
    } else {
      outcome_.error = std::string(step) + ": " + ec.message();
    }
    end();
  }

  void end() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
    if (done_) {
      HttpClient::DoneHandler done = std::move(done_);
      done_ = nullptr;
      done(std::move(outcome_));
    }
  }

  beast::tcp_stream stream_;
  http::request<http::string_body> request_;
  double timeout_s_;
  bool want_events_;
  bool as_events_ = false;
  std::optional<HttpClient::Clock::time_point> deadline_;
  beast::flat_buffer buffer_;
  http::response_parser<http::buffer_body> parser_;
  std::array<char, kReadChunkBytes> chunk_{};
  SseParser sse_;
  std::vector<std::string> events_;
  HttpClient::EventHandler on_event_;
  HttpClient::DoneHandler done_;
  HttpOutcome outcome_;
};

}  // namespace

Expected<BaseUrl> parse_base_url(std::string_view url) {
  const std::string original(url);
  std::string_view rest = url;
  if (const size_t scheme_end = rest.find("://"); scheme_end != std::string_view::npos) {
    const std::string scheme = lowercase(rest.substr(0, scheme_end));
    if (scheme == "https") return Status::error("base URL '" + original + "': https is not supported, use http://");
    if (scheme != "http") return Status::error("base URL '" + original + "' is not an http:// URL");
    rest.remove_prefix(scheme_end + 3);
  }
  const size_t path_start = rest.find('/');
  std::string_view authority = rest.substr(0, path_start);
  std::string_view path = path_start == std::string_view::npos ? std::string_view() : rest.substr(path_start);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (authority.find('@') != std::string_view::npos) {
    return Status::error("base URL '" + original + "': user names in URLs are not supported (use --api-key)");
  }
  BaseUrl parsed;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return Status::error("base URL '" + original + "' has an unclosed '['");
    parsed.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return Status::error("base URL '" + original + "' has junk after ']'");
      port = after.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    parsed.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (parsed.host.empty()) return Status::error("base URL '" + original + "' names no host");
  if (!port.empty() || authority.find(':') != std::string_view::npos) {
    if (!all_digits(port) || port.size() > 5 || std::stoi(std::string(port)) < 1 ||
        std::stoi(std::string(port)) > 65535) {
      return Status::error("base URL '" + original + "' has a bad port '" + std::string(port) + "'");
    }
    parsed.port = std::string(port);
  }
  parsed.path_prefix = std::string(path);
  return parsed;
}

struct HttpClient::Impl {
  Impl(BaseUrl base, std::string key) : url(std::move(base)), api_key(std::move(key)) {}

  // Resolved once, on first use, blocking (a name lookup before any request is timed).
  Expected<tcp::resolver::results_type> endpoints() {
    if (resolved) return *resolved;
    tcp::resolver resolver(io);
    beast::error_code ec;
    tcp::resolver::results_type results = resolver.resolve(url.host, url.port, ec);
    if (ec) return Status::error("cannot resolve '" + url.host + "': " + ec.message());
    resolved = results;
    return results;
  }

  http::request<http::string_body> request(http::verb verb, const std::string& path) const {
    http::request<http::string_body> req{verb, url.path_prefix + path, 11};
    req.set(http::field::host, host_header(url));
    req.set(http::field::user_agent, "folio-bench-serve");
    if (!api_key.empty()) req.set(http::field::authorization, "Bearer " + api_key);
    // A connection per request: nothing is left idle on the server between measurements.
    req.keep_alive(false);
    return req;
  }

  void start(http::request<http::string_body> req, double timeout_s, bool as_events, EventHandler on_event,
             DoneHandler done) {
    Expected<tcp::resolver::results_type> targets = endpoints();
    if (!targets) {
      // Through the queue, so that done never runs inside the call that started the exchange.
      net::post(io, [done = std::move(done), error = targets.error()] { done(HttpOutcome{0, error, {}}); });
      return;
    }
    auto exchange =
        std::make_shared<Exchange>(io, std::move(req), timeout_s, as_events, std::move(on_event), std::move(done));
    exchange->start(*targets);
  }

  net::io_context io{1};
  BaseUrl url;
  std::string api_key;
  std::optional<tcp::resolver::results_type> resolved;
};

HttpClient::HttpClient(BaseUrl url, std::string api_key)
    : impl_(std::make_unique<Impl>(std::move(url), std::move(api_key))) {}

HttpClient::~HttpClient() = default;

const BaseUrl& HttpClient::base_url() const {
  return impl_->url;
}

void HttpClient::get(const std::string& path, double timeout_s, DoneHandler done) {
  impl_->start(impl_->request(http::verb::get, path), timeout_s, /*as_events=*/false, nullptr, std::move(done));
}

void HttpClient::post_events(const std::string& path, std::string json_body, double timeout_s, EventHandler on_event,
                             DoneHandler done) {
  http::request<http::string_body> req = impl_->request(http::verb::post, path);
  req.set(http::field::content_type, "application/json");
  req.set(http::field::accept, "text/event-stream");
  req.body() = std::move(json_body);
  req.prepare_payload();
  impl_->start(std::move(req), timeout_s, /*as_events=*/true, std::move(on_event), std::move(done));
}

void HttpClient::call_at(Clock::time_point when, std::function<void()> fn) {
  auto timer = std::make_shared<net::steady_timer>(impl_->io, when);
  timer->async_wait([timer, fn = std::move(fn)](beast::error_code ec) {
    if (!ec) fn();
  });
}

void HttpClient::run() {
  impl_->io.restart();
  impl_->io.run();
}

}  // namespace folio::cli
