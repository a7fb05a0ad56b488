// libFuzzer target: the OpenAI request parsers (src/server/openai_request.h) on arbitrary
// bytes, as an HTTP body reaches them. Every parser must return a request or a Status, never
// crash, hang or trip a sanitizer; an accepted request must also satisfy the invariants the
// rest of the server relies on (checked here, so that a violation is a crash the fuzzer keeps).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/openai_request.h"

namespace {

void require(bool condition) {
  if (!condition) std::abort();
}

void check_options(const folio::server::GenerationOptions& options) {
  const folio::SamplingParams& s = options.params.sampling;
  require(s.temperature >= 0.0f && s.temperature <= 2.0f);
  require(s.top_p > 0.0f && s.top_p <= 1.0f);
  require(s.logprobs >= -1 && s.logprobs <= folio::SamplingParams::kMaxLogprobs);
  require(options.params.n >= 1 && options.params.n <= folio::server::kMaxParallelSamples);
  require(!options.max_tokens || (*options.max_tokens >= 1 && *options.max_tokens <= folio::server::kMaxRequestTokens));
  require(options.params.stop.size() <= folio::server::kMaxStopStrings);
  for (const std::string& stop : options.params.stop) require(!stop.empty());
  require(!(options.echo && s.logprobs >= 0));
  require(options.stream || !options.include_usage);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  if (auto r = folio::server::parse_completion_request(body)) {
    check_options(r->options);
    require(!r->prompts.empty() && r->prompts.size() <= folio::server::kMaxPrompts);
    for (const folio::server::CompletionPrompt& p : r->prompts) {
      require(p.text ? !p.text->empty() && p.tokens.empty() : !p.tokens.empty());
      for (int32_t id : p.tokens) require(id >= 0);
    }
  }
  if (auto r = folio::server::parse_chat_completion_request(body)) {
    check_options(r->options);
    require(!r->messages.empty());
  }
  if (auto r = folio::server::parse_tokenize_request(body)) {
    require(r->prompt.has_value() != !r->messages.empty());
  }
  if (auto r = folio::server::parse_detokenize_request(body)) {
    for (int32_t id : r->tokens) require(id >= 0);
  }
  return 0;
}
