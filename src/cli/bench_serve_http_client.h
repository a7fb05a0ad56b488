// The HTTP/1.1 client of `folio bench serve`: many exchanges in flight at once on one thread
// (Boost.Asio/Beast, no thread per request), each on its own connection. A response to a
// streaming request is read as it arrives and its server-sent events handed out one by one,
// stamped with the time their bytes were read; chunked transfer encoding is undone by Beast,
// events cut across reads are joined by SseParser.
//
//   HttpClient client(*url, api_key);
//   client.call_at(start, [&] { client.post_events(path, body, 30.0, on_event, on_done); });
//   client.run();   // returns when no exchange and no timer is left
//
// Every handler runs on the thread inside run(). Errors (refused, reset, timed out, 4xx/5xx)
// end an exchange through its done handler; nothing here throws past run().
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace folio::cli {

// --base-url: http://HOST[:PORT][/PREFIX]. https is refused (the benchmark measures the
// server, not a TLS stack).
struct BaseUrl {
  std::string host;
  std::string port = "80";
  std::string path_prefix;  // "" or "/something", without a trailing slash
};
Expected<BaseUrl> parse_base_url(std::string_view url);

// How one exchange ended.
struct HttpOutcome {
  int status = 0;     // the response's status code; 0 when no response came
  std::string error;  // empty when the whole response was read
  std::string body;   // the body of a response not read as events (kept up to 1 MiB)
  bool ok() const { return error.empty() && status >= 200 && status < 300; }
};

class HttpClient {
 public:
  using Clock = std::chrono::steady_clock;
  using EventHandler = std::function<void(std::string_view data, Clock::time_point arrival)>;
  using DoneHandler = std::function<void(HttpOutcome outcome)>;

  HttpClient(BaseUrl url, std::string api_key);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  const BaseUrl& base_url() const;

  // path: appended to the URL's prefix ("/v1/models"). timeout_s: for the whole exchange,
  // connect to last byte; 0 means none.
  void get(const std::string& path, double timeout_s, DoneHandler done);
  // POSTs a JSON body. A 2xx response's body is parsed as server-sent events, each event's
  // data going to on_event as it arrives; any other response's body ends up in the outcome.
  void post_events(const std::string& path, std::string json_body, double timeout_s, EventHandler on_event,
                   DoneHandler done);
  // fn runs on the client's thread at `when` (or at once if that has passed).
  void call_at(Clock::time_point when, std::function<void()> fn);
  // Runs handlers until nothing is pending; may be called again afterwards.
  void run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace folio::cli
