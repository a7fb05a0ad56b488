#include "server/openai_request.h"

#include <gtest/gtest.h>

namespace folio::server {
namespace {

TEST(OpenAiRequestTest, CompletionWithEveryField) {
  Expected<CompletionRequest> r = parse_completion_request(R"({
    "model": "m", "prompt": "hello", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 40,
    "min_p": 0.1, "seed": 42, "stop": ["a", "bc"], "n": 3, "presence_penalty": 0.5,
    "frequency_penalty": -0.5, "repetition_penalty": 1.1, "stream": true,
    "stream_options": {"include_usage": true}, "user": "u", "unknown_field": [1]})");
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->options.model, "m");
  EXPECT_EQ(*r->prompt_text, "hello");
  EXPECT_EQ(r->options.max_tokens, 7);
  const SamplingParams& s = r->options.params.sampling;
  EXPECT_FLOAT_EQ(s.temperature, 0.5f);
  EXPECT_FLOAT_EQ(s.top_p, 0.9f);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_FLOAT_EQ(s.min_p, 0.1f);
  EXPECT_EQ(s.seed, 42u);
  EXPECT_FLOAT_EQ(s.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(s.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(s.repetition_penalty, 1.1f);
  EXPECT_EQ(r->options.params.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(r->options.params.n, 3);
  EXPECT_TRUE(r->options.stream);
  EXPECT_TRUE(r->options.include_usage);
}

TEST(OpenAiRequestTest, DefaultsFollowOpenAi) {
  Expected<CompletionRequest> r = parse_completion_request(R"({"prompt": "x", "temperature": null})");
  ASSERT_TRUE(r) << r.error();
  EXPECT_FALSE(r->options.max_tokens);
  EXPECT_FLOAT_EQ(r->options.params.sampling.temperature, 1.0f);
  EXPECT_FALSE(r->options.stream);
  EXPECT_EQ(r->options.params.n, 1);
}

TEST(OpenAiRequestTest, PromptForms) {
  Expected<CompletionRequest> ids = parse_completion_request(R"({"prompt": [1, 2, 3]})");
  ASSERT_TRUE(ids) << ids.error();
  EXPECT_EQ(*ids->prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  Expected<CompletionRequest> one = parse_completion_request(R"({"prompt": ["only"]})");
  ASSERT_TRUE(one) << one.error();
  EXPECT_EQ(*one->prompt_text, "only");
  Expected<CompletionRequest> nested = parse_completion_request(R"({"prompt": [[5, 6]]})");
  ASSERT_TRUE(nested) << nested.error();
  EXPECT_EQ(*nested->prompt_tokens, (std::vector<int32_t>{5, 6}));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": ["a", "b"]})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": ""})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": []})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": [1, -2]})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": [1, 2.5]})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": 12})"));
  EXPECT_FALSE(parse_completion_request(R"({"max_tokens": 3})"));
}

TEST(OpenAiRequestTest, MalformedBodies) {
  for (const char* body : {"", "{", "[]", "\"text\"", "{\"prompt\": \"a\",}", "null", "{\"prompt\": \"\xff\"}"}) {
    EXPECT_FALSE(parse_completion_request(body)) << body;
  }
  EXPECT_NE(parse_completion_request("{").error().find("not valid JSON"), std::string::npos);
}

TEST(OpenAiRequestTest, WrongTypesAreNamed) {
  Expected<CompletionRequest> r = parse_completion_request(R"({"prompt": "x", "temperature": "hot"})");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("'temperature'"), std::string::npos) << r.error();
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "max_tokens": "5"})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "max_tokens": 2.5})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "stream": 1})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "stop": 3})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "stop": ["a", 3]})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "model": 7})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "seed": true})"));
  EXPECT_TRUE(parse_completion_request(R"({"prompt": "x", "max_tokens": 5.0})"));
}

TEST(OpenAiRequestTest, OutOfRangeValues) {
  for (const char* field : {R"("max_tokens": 0)", R"("max_tokens": -1)", R"("max_tokens": 1e30)",
                            R"("max_tokens": 99999999999999999999999)", R"("temperature": -0.1)",
                            R"("temperature": 2.5)", R"("top_p": 0)", R"("top_p": 1.5)", R"("top_k": -2)",
                            R"("min_p": 1.5)", R"("n": 0)", R"("n": 1000)", R"("presence_penalty": 3)",
                            R"("frequency_penalty": -2.5)", R"("repetition_penalty": 0)", R"("stop": "")",
                            R"("stop_token_ids": [-1])"}) {
    const std::string body = std::string(R"({"prompt": "x", )") + field + "}";
    EXPECT_FALSE(parse_completion_request(body)) << body;
  }
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "stop": ["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]})"));
}

TEST(OpenAiRequestTest, StreamOptionsNeedStream) {
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "stream_options": {"include_usage": true}})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "stream": true, "stream_options": 1})"));
}

TEST(OpenAiRequestTest, UnsupportedFeaturesAreRefused) {
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "logprobs": 2})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "echo": true})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "best_of": 3})"));
  EXPECT_TRUE(parse_completion_request(R"({"prompt": "x", "echo": false, "best_of": 1, "logprobs": null})"));
}

TEST(OpenAiRequestTest, ChatMessages) {
  Expected<ChatCompletionRequest> r = parse_chat_completion_request(R"({
    "messages": [{"role": "system", "content": "be brief"},
                 {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                 {"role": "assistant", "content": null}],
    "max_completion_tokens": 9})");
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->messages.size(), 3u);
  EXPECT_EQ(r->messages[0].role, "system");
  EXPECT_EQ(r->messages[1].content, "a\nb");
  EXPECT_EQ(r->messages[2].content, "");
  EXPECT_EQ(r->options.max_tokens, 9);
}

TEST(OpenAiRequestTest, BadChatMessages) {
  for (const char* body : {R"({})", R"({"messages": []})", R"({"messages": "hi"})", R"({"messages": [1]})",
                           R"({"messages": [{"content": "x"}]})", R"({"messages": [{"role": 1, "content": "x"}]})",
                           R"({"messages": [{"role": "user", "content": 5}]})",
                           R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})"}) {
    EXPECT_FALSE(parse_chat_completion_request(body)) << body;
  }
}

}  // namespace
}  // namespace folio::server
