// libFuzzer target: whole HTTP requests as bytes, through everything a connection does with
// them but the socket (src/server/http_session.cpp does the same steps on a stream): Beast's
// request parser, header first, then the body into a string; the framing rules
// (http_exchange: Transfer-Encoding other than chunked, or with Content-Length); routing from
// the request line and the API key alone (401 / 404 / 405); the route's handling (the OpenAI
// parsers, planning with a small byte-level tokenizer and a ChatML template, /tokenize and
// /detokenize); and the response serialized by Beast. Every step must give a result or an
// error, never crash, hang or trip a sanitizer; an accepted generation must have prompts of
// in-vocabulary tokens that fit the context.
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "server/api_routes.h"
#include "server/http_exchange.h"
#include "text/byte_level.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"
#include "text/tokenizer_metadata.h"

namespace {

namespace http = boost::beast::http;

void require(bool condition) {
  if (!condition) std::abort();
}

// 256 byte tokens, then <|im_start|> and <|im_end|> (control), as a byte-level BPE without merges.
folio::Tokenizer make_tokenizer() {
  folio::TokenizerMetadata m;
  m.model = "gpt2";
  m.pre = "default";
  for (int b = 0; b < 256; ++b) {
    std::string text;
    folio::append_byte_level(text, std::string(1, static_cast<char>(b)));
    m.tokens.push_back(text);
  }
  m.tokens.push_back("<|im_start|>");
  m.tokens.push_back("<|im_end|>");
  m.token_types = std::vector<int64_t>(256, 1);
  m.token_types->push_back(3);
  m.token_types->push_back(3);
  m.merges = std::vector<std::string>{};
  m.ids = {{"bos_token_id", 256}, {"eos_token_id", 257}};
  return std::move(folio::Tokenizer::from_metadata(m)).value();
}

struct Fixture {
  folio::Tokenizer tokenizer = make_tokenizer();
  folio::server::ApiContext context;
  Fixture() {
    context.model.tokenizer = &tokenizer;
    context.model.name = "fuzz";
    context.model.context_tokens = 4096;
    context.model.chat_template =
        std::move(folio::ChatTemplate::parse("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
                                             "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>"
                                             "assistant\n{% endif %}"))
            .value();
    context.api_key = "k";
    context.worker = nullptr;  // /metrics answers 503; generations are planned, not run
  }
};

void check_result(const folio::server::ApiResult& result, const Fixture& f) {
  if (const auto* plan = std::get_if<folio::server::GenerationPlan>(&result)) {
    require(!plan->prompts.empty());
    for (const std::vector<int32_t>& prompt : plan->prompts) {
      require(!prompt.empty() && static_cast<int32_t>(prompt.size()) < f.context.model.context_tokens);
      for (int32_t id : prompt) require(id >= 0 && id < f.tokenizer.vocab_size());
    }
    require(plan->params.max_tokens >= 1);
    return;
  }
  const auto& response = std::get<folio::server::ApiResponse>(result);
  require(response.status >= 200 && response.status < 600);
  for (const bool head : {false, true}) {
    const std::string bytes = folio::server::serialize_response(response, 11, true, head);
    require(bytes.rfind("HTTP/1.1 ", 0) == 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fixture;
  boost::beast::flat_buffer buffer;
  buffer.commit(boost::asio::buffer_copy(buffer.prepare(size), boost::asio::buffer(data, size)));
  // Requests one after another on the "connection", as keep-alive and pipelining deliver them.
  for (int request = 0; request < 4 && buffer.size() > 0; ++request) {
    http::request_parser<http::empty_body> header_parser;
    header_parser.header_limit(16 * 1024);
    header_parser.eager(false);
    boost::beast::error_code ec;
    while (!header_parser.is_header_done()) {
      const size_t used = header_parser.put(buffer.data(), ec);
      buffer.consume(used);
      if (ec == http::error::need_more) {
        // Beast consumes nothing until a whole header (or chunk line) is buffered. Every byte
        // the client will send is already here, so needing more with nothing consumed means
        // the client stopped mid-header (the session's read then times out). Looping on it
        // hung this target on its 55th input.
        if (buffer.size() == 0 || used == 0) return 0;
        ec = {};
        continue;
      }
      if (ec || used == 0) return 0;  // a 400 / 431 and close, in the session
    }
    const auto& header = header_parser.get();
    if (folio::server::framing_error(header)) return 0;  // 400 and close
    std::variant<folio::server::Route, folio::server::ApiResponse> routed = folio::server::route_request(
        header.method_string(), header.target(), header[http::field::authorization], fixture.context);
    if (auto* early = std::get_if<folio::server::ApiResponse>(&routed)) {
      check_result(*early, fixture);
      if (folio::server::has_body(header)) return 0;  // answered from the header; the connection closes
      continue;
    }
    std::string body;
    if (folio::server::has_body(header)) {
      http::request_parser<http::string_body> body_parser(std::move(header_parser));
      body_parser.body_limit(64 * 1024);
      body_parser.eager(true);
      while (!body_parser.is_done()) {
        const size_t used = body_parser.put(buffer.data(), ec);
        buffer.consume(used);
        if (ec == http::error::need_more) {
          if (buffer.size() == 0 || used == 0) {  // the input ends inside the body or a chunk line
            body_parser.put_eof(ec);
            if (ec) return 0;  // truncated: the session closes
            break;
          }
          ec = {};
          continue;
        }
        if (ec || (used == 0 && !body_parser.is_done())) return 0;
      }
      body = std::move(body_parser.get().body());
    }
    check_result(folio::server::handle_route(std::get<folio::server::Route>(routed), body, fixture.context), fixture);
  }
  return 0;
}
