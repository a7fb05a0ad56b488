// Request bodies and the reading of streamed answers into records, on made-up event streams
// with made-up arrival times (no network).
#ifdef FOLIO_HAS_SERVER
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/bench_serve_openai.h"

namespace folio::cli {
namespace {

using Clock = OpenAiStreamRecorder::Clock;
using nlohmann::json;

Clock::time_point at_ms(Clock::time_point t0, int ms) {
  return t0 + std::chrono::milliseconds(ms);
}

std::string completion_chunk(const std::string& text, const char* finish = nullptr) {
  json choice = {{"index", 0}, {"text", text}, {"finish_reason", finish ? json(finish) : json(nullptr)}};
  return json{{"object", "text_completion"}, {"choices", json::array({choice})}, {"usage", nullptr}}.dump();
}

std::string chat_chunk(const json& delta) {
  return json{{"object", "chat.completion.chunk"}, {"choices", json::array({json{{"index", 0}, {"delta", delta}}})}}
      .dump();
}

std::string usage_chunk(int prompt, int completion) {
  return json{
      {"choices", json::array()},
      {"usage", {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}}}}
      .dump();
}

const HttpOutcome kOk{200, "", ""};

TEST(OpenAiStreamRecorder, TimesContentChunksAndTakesUsage) {
  const Clock::time_point t0 = Clock::now();
  OpenAiStreamRecorder recorder(ApiKind::kCompletions, t0);
  recorder.on_event(completion_chunk("Hel"), at_ms(t0, 100));
  recorder.on_event(completion_chunk("lo"), at_ms(t0, 150));
  recorder.on_event(completion_chunk(" you", "length"), at_ms(t0, 180));
  recorder.on_event(usage_chunk(12, 3), at_ms(t0, 180));
  recorder.on_event("[DONE]", at_ms(t0, 181));
  const RequestRecord r = recorder.finish(kOk, at_ms(t0, 190), 99, 3);
  EXPECT_TRUE(r.success) << r.error;
  EXPECT_NEAR(r.ttft_s, 0.100, 1e-9);
  ASSERT_EQ(r.itls_s.size(), 2u);
  EXPECT_NEAR(r.itls_s[0], 0.050, 1e-9);
  EXPECT_NEAR(r.itls_s[1], 0.030, 1e-9);
  EXPECT_NEAR(r.e2e_s, 0.181, 1e-9);  // [DONE], not the connection's close
  EXPECT_EQ(r.prompt_tokens, 12);
  EXPECT_TRUE(r.prompt_tokens_from_server);
  EXPECT_EQ(r.output_tokens, 3);
  EXPECT_EQ(r.output_tokens_source, TokenCountSource::kServerUsage);
  EXPECT_EQ(r.requested_output_tokens, 3);
  EXPECT_NEAR(r.tpot_s(), 0.0405, 1e-9);  // (0.181 - 0.1) / 2
  EXPECT_EQ(recorder.text(), "Hello you");
}

TEST(OpenAiStreamRecorder, ChatRoleAndFinishChunksCarryNoToken) {
  const Clock::time_point t0 = Clock::now();
  OpenAiStreamRecorder recorder(ApiKind::kChatCompletions, t0);
  recorder.on_event(chat_chunk({{"role", "assistant"}, {"content", ""}}), at_ms(t0, 10));
  recorder.on_event(chat_chunk({{"content", "Hi"}}), at_ms(t0, 40));
  recorder.on_event(chat_chunk({{"content", "!"}}), at_ms(t0, 60));
  recorder.on_event(chat_chunk(json::object()), at_ms(t0, 61));  // finish_reason only
  recorder.on_event("[DONE]", at_ms(t0, 62));
  const RequestRecord r = recorder.finish(kOk, at_ms(t0, 70), 8, 16);
  EXPECT_TRUE(r.success) << r.error;
  EXPECT_NEAR(r.ttft_s, 0.040, 1e-9);
  ASSERT_EQ(r.itls_s.size(), 1u);
  EXPECT_NEAR(r.itls_s[0], 0.020, 1e-9);
  // No usage: one token per content chunk, our own prompt count.
  EXPECT_EQ(r.output_tokens, 2);
  EXPECT_EQ(r.output_tokens_source, TokenCountSource::kChunks);
  EXPECT_EQ(r.prompt_tokens, 8);
  EXPECT_FALSE(r.prompt_tokens_from_server);
}

TEST(OpenAiStreamRecorder, AStreamWithoutDoneEndsAtItsLastEvent) {
  const Clock::time_point t0 = Clock::now();
  OpenAiStreamRecorder recorder(ApiKind::kCompletions, t0);
  recorder.on_event(completion_chunk("the cat sat on"), at_ms(t0, 5));  // one chunk, counted once
  recorder.on_event(completion_chunk(" the mat"), at_ms(t0, 9));
  const RequestRecord r = recorder.finish(kOk, at_ms(t0, 12), 4, 8);
  EXPECT_TRUE(r.success);
  EXPECT_EQ(r.output_tokens_source, TokenCountSource::kChunks);
  EXPECT_EQ(r.output_tokens, 2);
  EXPECT_NEAR(r.e2e_s, 0.009, 1e-9);
}

TEST(OpenAiStreamRecorder, FailuresSayWhy) {
  const Clock::time_point t0 = Clock::now();
  {
    OpenAiStreamRecorder recorder(ApiKind::kCompletions, t0);
    const RequestRecord r = recorder.finish(
        HttpOutcome{400, "",
                    R"({"error":{"message":"'logit_bias' is not supported yet","type":"invalid_request_error"}})"},
        at_ms(t0, 3), 4, 8);
    EXPECT_FALSE(r.success);
    EXPECT_EQ(r.error, "HTTP 400: 'logit_bias' is not supported yet");
  }
  {
    OpenAiStreamRecorder recorder(ApiKind::kCompletions, t0);
    const RequestRecord r = recorder.finish(HttpOutcome{0, "connect: Connection refused", ""}, at_ms(t0, 1), 4, 8);
    EXPECT_FALSE(r.success);
    EXPECT_EQ(r.error, "connect: Connection refused");
  }
  {
    OpenAiStreamRecorder recorder(ApiKind::kCompletions, t0);
    recorder.on_event(completion_chunk("a"), at_ms(t0, 5));
    const RequestRecord r =
        recorder.finish(HttpOutcome{200, "no complete response within 1 s", ""}, at_ms(t0, 1000), 4, 8);
    EXPECT_FALSE(r.success);
    EXPECT_EQ(r.error, "HTTP 200, then no complete response within 1 s");
  }
  {
    OpenAiStreamRecorder recorder(ApiKind::kCompletions, t0);
    recorder.on_event(completion_chunk("a"), at_ms(t0, 5));
    recorder.on_event(R"({"error":{"message":"engine died"}})", at_ms(t0, 6));
    recorder.on_event("[DONE]", at_ms(t0, 7));
    const RequestRecord r = recorder.finish(kOk, at_ms(t0, 8), 4, 8);
    EXPECT_FALSE(r.success);
    EXPECT_NE(r.error.find("engine died"), std::string::npos);
  }
  {
    OpenAiStreamRecorder recorder(ApiKind::kCompletions, t0);
    recorder.on_event("[DONE]", at_ms(t0, 7));
    EXPECT_EQ(recorder.finish(kOk, at_ms(t0, 8), 4, 8).error, "the stream carried no generated text");
  }
  EXPECT_EQ(describe_http_error(422, R"({"detail":[{"msg":"field required"}]})"),
            R"(HTTP 422: [{"msg":"field required"}])");
  EXPECT_EQ(describe_http_error(502, "<html>\nBad Gateway</html>"), "HTTP 502: <html> Bad Gateway</html>");
}

TEST(OpenAiRequestBody, StreamsWithUsageAndTheAskedFields) {
  RequestFields fields;
  fields.model = "m";
  fields.ignore_eos = true;
  fields.banned_token_ids = {0, 2};
  const json completion = json::parse(openai_request_body(ApiKind::kCompletions, fields, "hi", 7));
  EXPECT_EQ(completion["model"], "m");
  EXPECT_EQ(completion["prompt"], "hi");
  EXPECT_EQ(completion["max_tokens"], 7);
  EXPECT_EQ(completion["temperature"], 0.0);
  EXPECT_EQ(completion["stream"], true);
  EXPECT_EQ(completion["stream_options"]["include_usage"], true);
  EXPECT_EQ(completion["ignore_eos"], true);
  EXPECT_EQ(completion["logit_bias"], (json{{"0", -100}, {"2", -100}}));

  fields.ignore_eos = false;
  fields.banned_token_ids.clear();
  fields.extra_body = json{{"repeat_penalty", 1.0}, {"temperature", 0.5}};
  const json chat = json::parse(openai_request_body(ApiKind::kChatCompletions, fields, "hi", 7));
  EXPECT_EQ(chat["messages"], json::parse(R"([{"role":"user","content":"hi"}])"));
  EXPECT_FALSE(chat.contains("prompt"));
  EXPECT_FALSE(chat.contains("ignore_eos"));
  EXPECT_FALSE(chat.contains("logit_bias"));
  EXPECT_EQ(chat["repeat_penalty"], 1.0);
  EXPECT_EQ(chat["temperature"], 0.5);  // extra body wins
}

TEST(OpenAiRequestBody, EndpointKinds) {
  EXPECT_EQ(api_kind_of("/v1/completions"), ApiKind::kCompletions);
  EXPECT_EQ(api_kind_of("/v1/chat/completions"), ApiKind::kChatCompletions);
  EXPECT_EQ(api_kind_of("/v1/chat/completions/"), ApiKind::kChatCompletions);
  EXPECT_FALSE(api_kind_of("/v1/models").has_value());
}

}  // namespace
}  // namespace folio::cli
#endif  // FOLIO_HAS_SERVER
