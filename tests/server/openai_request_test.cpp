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
  ASSERT_EQ(r->prompts.size(), 1u);
  EXPECT_EQ(*r->prompts[0].text, "hello");
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

// A model's generation_config.json values fill what a request leaves out, and only that.
TEST(OpenAiRequestTest, ModelDefaultsApplyWhereTheRequestGivesNone) {
  SamplingParams defaults;
  defaults.temperature = 0.6f;
  defaults.top_p = 0.9f;
  defaults.top_k = 20;
  Expected<CompletionRequest> none = parse_completion_request(R"({"prompt": "x"})", defaults);
  ASSERT_TRUE(none) << none.error();
  EXPECT_FLOAT_EQ(none->options.params.sampling.temperature, 0.6f);
  EXPECT_FLOAT_EQ(none->options.params.sampling.top_p, 0.9f);
  EXPECT_EQ(none->options.params.sampling.top_k, 20);
  Expected<ChatCompletionRequest> given = parse_chat_completion_request(
      R"({"messages": [{"role": "user", "content": "hi"}], "temperature": 0, "top_k": -1})", defaults);
  ASSERT_TRUE(given) << given.error();
  EXPECT_FLOAT_EQ(given->options.params.sampling.temperature, 0.0f);
  EXPECT_EQ(given->options.params.sampling.top_k, -1);
  EXPECT_FLOAT_EQ(given->options.params.sampling.top_p, 0.9f);  // not given: the model's
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
  ASSERT_EQ(ids->prompts.size(), 1u);
  EXPECT_FALSE(ids->prompts[0].text);
  EXPECT_EQ(ids->prompts[0].tokens, (std::vector<int32_t>{1, 2, 3}));
  Expected<CompletionRequest> one = parse_completion_request(R"({"prompt": ["only"]})");
  ASSERT_TRUE(one) << one.error();
  ASSERT_EQ(one->prompts.size(), 1u);
  EXPECT_EQ(*one->prompts[0].text, "only");
  Expected<CompletionRequest> nested = parse_completion_request(R"({"prompt": [[5, 6]]})");
  ASSERT_TRUE(nested) << nested.error();
  EXPECT_EQ(nested->prompts[0].tokens, (std::vector<int32_t>{5, 6}));
  Expected<CompletionRequest> several = parse_completion_request(R"({"prompt": ["a", [7], "b"], "n": 2})");
  ASSERT_TRUE(several) << several.error();
  ASSERT_EQ(several->prompts.size(), 3u);
  EXPECT_EQ(*several->prompts[2].text, "b");
  EXPECT_EQ(several->prompts[1].tokens, (std::vector<int32_t>{7}));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": ["a", ""]})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": ["a", 5]})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": [["a"]]})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": ["a", "b"], "n": 1000})"));  // prompts x n too many
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
  for (const char* field :
       {R"("max_tokens": 0)", R"("max_tokens": -1)", R"("max_tokens": 1e30)",
        R"("max_tokens": 99999999999999999999999)", R"("temperature": -0.1)", R"("temperature": 2.5)", R"("top_p": 0)",
        R"("top_p": 1.5)", R"("top_k": -2)", R"("min_p": 1.5)", R"("n": 0)", R"("n": 1000)", R"("presence_penalty": 3)",
        R"("frequency_penalty": -2.5)", R"("repetition_penalty": 0)", R"("stop": "")", R"("stop_token_ids": [-1])"}) {
    const std::string body = std::string(R"({"prompt": "x", )") + field + "}";
    EXPECT_FALSE(parse_completion_request(body)) << body;
  }
  EXPECT_FALSE(parse_completion_request(
      R"({"prompt": "x", "stop": ["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]})"));
}

TEST(OpenAiRequestTest, StreamOptionsNeedStream) {
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "stream_options": {"include_usage": true}})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "stream": true, "stream_options": 1})"));
}

TEST(OpenAiRequestTest, UnsupportedFeaturesAreRefused) {
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "echo": true, "logprobs": 1})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "best_of": 3})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "logit_bias": {"1": 2}})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "suffix": "y"})"));
  EXPECT_TRUE(parse_completion_request(R"({"prompt": "x", "echo": false, "best_of": 1, "logprobs": null})"));
}

TEST(OpenAiRequestTest, CompletionLogprobsAndEcho) {
  Expected<CompletionRequest> r = parse_completion_request(R"({"prompt": "x", "logprobs": 3})");
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->options.params.sampling.logprobs, 3);
  EXPECT_FALSE(r->options.echo);
  r = parse_completion_request(R"({"prompt": "x", "logprobs": 0})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->options.params.sampling.logprobs, 0);
  r = parse_completion_request(R"({"prompt": "x"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->options.params.sampling.logprobs, -1);  // nothing computed unless asked
  r = parse_completion_request(R"({"prompt": "x", "echo": true})");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->options.echo);
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "logprobs": 21})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "logprobs": -1})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "logprobs": true})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "top_logprobs": 2})"));
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "echo": 1})"));
}

TEST(OpenAiRequestTest, ChatLogprobs) {
  const char* m = R"("messages": [{"role": "user", "content": "hi"}])";
  auto chat = [&](const std::string& rest) { return parse_chat_completion_request("{" + std::string(m) + rest + "}"); };
  Expected<ChatCompletionRequest> r = chat(R"(, "logprobs": true, "top_logprobs": 5)");
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->options.params.sampling.logprobs, 5);
  r = chat(R"(, "logprobs": true)");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->options.params.sampling.logprobs, 0);
  r = chat(R"(, "logprobs": false)");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->options.params.sampling.logprobs, -1);
  EXPECT_FALSE(chat(R"(, "top_logprobs": 2)"));  // needs logprobs: true
  EXPECT_FALSE(chat(R"(, "logprobs": 2)"));      // a boolean in chat
  EXPECT_FALSE(chat(R"(, "logprobs": true, "top_logprobs": 21)"));
  EXPECT_FALSE(chat(R"(, "echo": true)"));
}

TEST(OpenAiRequestTest, TokenizeAndDetokenize) {
  Expected<TokenizeRequest> t = parse_tokenize_request(R"({"prompt": "hello", "add_special_tokens": false})");
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(*t->prompt, "hello");
  EXPECT_FALSE(t->add_special_tokens);
  t = parse_tokenize_request(R"({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": false})");
  ASSERT_TRUE(t) << t.error();
  EXPECT_FALSE(t->prompt);
  ASSERT_EQ(t->messages.size(), 1u);
  EXPECT_FALSE(t->add_generation_prompt);
  EXPECT_FALSE(parse_tokenize_request(R"({})"));
  EXPECT_FALSE(parse_tokenize_request(R"({"prompt": "a", "messages": [{"role": "user", "content": "hi"}]})"));
  EXPECT_FALSE(parse_tokenize_request(R"({"prompt": 5})"));
  Expected<DetokenizeRequest> d = parse_detokenize_request(R"({"tokens": [1, 2, 3]})");
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(parse_detokenize_request(R"({"tokens": [1, -2]})"));
  EXPECT_FALSE(parse_detokenize_request(R"({"tokens": "1 2"})"));
  EXPECT_FALSE(parse_detokenize_request(R"({"tokens": [1.5]})"));
  EXPECT_FALSE(parse_detokenize_request(R"([1, 2])"));
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

TEST(OpenAiRequestTest, ABodyIsOneJsonValueAndNothingAfterANul) {
  const std::string valid = R"({"prompt": "hi", "max_tokens": 2})";
  ASSERT_TRUE(parse_completion_request(valid));
  const std::string with_nul = valid + std::string(1, '\0') + "garbage";
  const auto r = parse_completion_request(with_nul);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("NUL byte at offset " + std::to_string(valid.size())), std::string::npos) << r.error();
  EXPECT_FALSE(parse_completion_request(valid + " {}"));
}

}  // namespace folio::server
