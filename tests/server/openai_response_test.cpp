#include "server/openai_response.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace folio::server {
namespace {

using nlohmann::json;

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
  ResponseAssembler a(ResponseIdentity{ApiKind::kCompletion, "cmpl-1", 100, "m", 2, false, false});
  EXPECT_EQ(a.add(output(0, "Hel", false, 1)), "");
  a.add(output(1, "Bye", true, 1));
  EXPECT_FALSE(a.done());
  a.add(output(0, "lo", true, 2));
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
  ResponseAssembler a(ResponseIdentity{ApiKind::kChat, "chatcmpl-1", 100, "m", 1, true, true});
  const std::string first = a.add(output(0, "Hi", false, 1));
  // The role chunk, then the content chunk.
  ASSERT_EQ(first.rfind("data: ", 0), 0u);
  const size_t split = first.find("\n\ndata: ");
  ASSERT_NE(split, std::string::npos);
  const json role = json::parse(first.substr(6, split - 6));
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(role["usage"].is_null());
  const std::string last = a.add(output(0, "", true, 2));
  EXPECT_TRUE(a.done());
  EXPECT_NE(last.find("\"finish_reason\":\"length\""), std::string::npos);
  EXPECT_NE(last.find("\"completion_tokens\":2"), std::string::npos);
  EXPECT_EQ(last.substr(last.size() - 14), "data: [DONE]\n\n");
}

}  // namespace
}  // namespace folio::server
