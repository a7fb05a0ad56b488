#include "server/openai_response.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace folio::server {
namespace {

using nlohmann::json;

ResponseIdentity identity(ApiKind kind, const char* id, int32_t n, bool stream, bool include_usage) {
  ResponseIdentity r;
  r.kind = kind;
  r.id = id;
  r.created = 100;
  r.model = "m";
  r.n = n;
  r.stream = stream;
  r.include_usage = include_usage;
  return r;
}

RequestOutput output(int32_t index, std::string text, bool finished, int32_t num_output_tokens) {
  RequestOutput out;
  out.index = index;
  out.text_delta = std::move(text);
  out.finished = finished;
  out.finish_reason = finished ? FinishReason::kLength : FinishReason::kNone;
  out.num_prompt_tokens = 4;
  out.num_output_tokens = num_output_tokens;
  return out;
}

TEST(OpenAiResponseTest, ErrorBody) {
  const json e = json::parse(error_body(404, "no such thing"));
  EXPECT_EQ(e["error"]["message"], "no such thing");
  EXPECT_EQ(e["error"]["type"], "not_found_error");
  EXPECT_TRUE(e["error"]["param"].is_null());
  EXPECT_EQ(e["error"]["code"], 404);
}

TEST(OpenAiResponseTest, WholeCompletionWithTwoChoices) {
  ResponseAssembler a(identity(ApiKind::kCompletion, "cmpl-1", 2, false, false));
  EXPECT_EQ(a.add(0, output(0, "Hel", false, 1)), "");
  a.add(0, output(1, "Bye", true, 1));
  EXPECT_FALSE(a.done());
  a.add(0, output(0, "lo", true, 2));
  ASSERT_TRUE(a.done());
  const json r = json::parse(a.body());
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["id"], "cmpl-1");
  EXPECT_EQ(r["choices"][0]["text"], "Hello");
  EXPECT_EQ(r["choices"][1]["text"], "Bye");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(r["usage"]["completion_tokens"], 3);
  EXPECT_EQ(r["usage"]["total_tokens"], 7);
}

TEST(OpenAiResponseTest, ChatStreamEvents) {
  ResponseAssembler a(identity(ApiKind::kChat, "chatcmpl-1", 1, true, true));
  const std::string first = a.add(0, output(0, "Hi", false, 1));
  // The role chunk, then the content chunk.
  ASSERT_EQ(first.rfind("data: ", 0), 0u);
  const size_t split = first.find("\n\ndata: ");
  ASSERT_NE(split, std::string::npos);
  const json role = json::parse(first.substr(6, split - 6));
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(role["usage"].is_null());
  const std::string last = a.add(0, output(0, "", true, 2));
  EXPECT_TRUE(a.done());
  EXPECT_NE(last.find("\"finish_reason\":\"length\""), std::string::npos);
  EXPECT_NE(last.find("\"completion_tokens\":2"), std::string::npos);
  EXPECT_EQ(last.substr(last.size() - 14), "data: [DONE]\n\n");
}

SampleResult sample(int32_t token, float logprob, std::vector<std::pair<int32_t, float>> top) {
  SampleResult r;
  r.token = token;
  r.logprob = logprob;
  r.top_logprobs = std::move(top);
  return r;
}

TEST(OpenAiResponseTest, CompletionLogprobsAndEcho) {
  ResponseIdentity id = identity(ApiKind::kCompletion, "cmpl-1", 1, false, false);
  id.logprobs = 1;
  id.echo = {"Say:"};
  ResponseAssembler a(id);                        // no tokenizer: tokens are named by their ids
  RequestOutput first = output(0, "", false, 1);  // text held back (a possible stop string)
  first.new_samples = {sample(7, -0.5f, {{7, -0.5f}})};
  a.add(0, first);
  RequestOutput last = output(0, "ab", true, 2);
  last.new_samples = {sample(9, -1.25f, {{3, -0.25f}})};
  a.add(0, last);
  ASSERT_TRUE(a.done());
  const json r = json::parse(a.body());
  const json& c = r["choices"][0];
  EXPECT_EQ(c["text"], "Say:ab");
  EXPECT_EQ(c["logprobs"]["tokens"], json({"7", "9"}));
  EXPECT_EQ(c["logprobs"]["token_logprobs"], json({-0.5, -1.25}));
  EXPECT_EQ(c["logprobs"]["top_logprobs"][1]["3"], -0.25);
  // Offsets count from the start of the text, echoed prompt included.
  EXPECT_EQ(c["logprobs"]["text_offset"], json({4, 5}));
}

TEST(OpenAiResponseTest, ChatStreamCarriesHeldBackLogprobsOnTheNextChunk) {
  ResponseIdentity id = identity(ApiKind::kChat, "chatcmpl-1", 1, true, false);
  id.logprobs = 0;
  ResponseAssembler a(id);
  RequestOutput held = output(0, "", false, 1);
  held.new_samples = {sample(5, -0.1f, {})};
  a.add(0, held);  // only the role chunk: no text yet
  RequestOutput next = output(0, "xy", true, 2);
  next.new_samples = {sample(6, -0.2f, {})};
  const std::string events = a.add(0, next);
  const size_t start = events.find("data: {");
  ASSERT_NE(start, std::string::npos);
  const json chunk = json::parse(events.substr(start + 6, events.find("\n\n", start) - start - 6));
  const json& content = chunk["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);  // the held-back token's logprob is not lost
  EXPECT_EQ(content[0]["token"], "5");
  EXPECT_EQ(content[1]["logprob"], json(-0.2f));
  EXPECT_EQ(content[0]["bytes"], json({53}));
}

TEST(OpenAiResponseTest, SeveralPromptsNumberChoicesAndSumUsage) {
  ResponseIdentity id = identity(ApiKind::kCompletion, "cmpl-1", 2, false, false);
  id.num_prompts = 2;
  id.echo = {"A:", "B:"};
  ResponseAssembler a(id);
  for (int32_t index = 0; index < 4; ++index) {
    RequestOutput out = output(index % 2, std::to_string(index), true, 1);
    out.num_prompt_tokens = index < 2 ? 3 : 5;  // prompt 0 has 3 tokens, prompt 1 has 5
    a.add(index / 2, out);
    EXPECT_EQ(a.done(), index == 3);
  }
  const json r = json::parse(a.body());
  ASSERT_EQ(r["choices"].size(), 4u);
  EXPECT_EQ(r["choices"][1]["text"], "A:1");
  EXPECT_EQ(r["choices"][2]["text"], "B:2");
  EXPECT_EQ(r["usage"]["prompt_tokens"], 8);
  EXPECT_EQ(r["usage"]["completion_tokens"], 4);
}

}  // namespace
}  // namespace folio::server
