// The shared token-id and length checks at their boundaries: what passes, what fails, and that
// the message names the numbers a user has to change.
#include "engine/request_limits.h"

#include <gtest/gtest.h>

#include <vector>

namespace folio {
namespace {

TEST(RequestLimits, TokenIdsMustBeInTheVocabulary) {
  EXPECT_TRUE(check_token_ids(std::vector<int32_t>{0, 5, 99}, 100));
  EXPECT_TRUE(check_token_ids(std::vector<int32_t>{}, 100));
  const Status too_large = check_token_ids(std::vector<int32_t>{3, 100}, 100);
  ASSERT_FALSE(too_large);
  EXPECT_EQ(too_large.message(), "token id 100 is out of range (vocabulary size 100)");
  EXPECT_FALSE(check_token_ids(std::vector<int32_t>{-1}, 100));
}

TEST(RequestLimits, PromptAndMaxTokensMustFitTheContext) {
  EXPECT_TRUE(check_request_length(10, std::nullopt, 11));
  EXPECT_TRUE(check_request_length(10, 6, 16));
  EXPECT_FALSE(check_request_length(0, std::nullopt, 16));
  EXPECT_FALSE(check_request_length(16, std::nullopt, 16));  // no room for one generated token
  const Status too_long = check_request_length(10, 7, 16);
  ASSERT_FALSE(too_long);
  EXPECT_NE(too_long.message().find("you requested 17 tokens"), std::string::npos) << too_long.message();
}

TEST(RequestLimits, TheWholeRequestMustFitTheKvPool) {
  EXPECT_TRUE(check_request_fits_kv_pool(60, 4, 2048, 64));
  const Status too_big = check_request_fits_kv_pool(60, 5, 2048, 64);
  ASSERT_FALSE(too_big);
  EXPECT_EQ(too_big.message(), "prompt plus max_tokens (65 tokens) exceed the KV cache (64 tokens)");
  // A request stops at max_model_len, so it needs no more than that whatever its max_tokens.
  EXPECT_TRUE(check_request_fits_kv_pool(60, 1000, 64, 64));
  EXPECT_FALSE(check_request_fits_kv_pool(60, 1000, 65, 64));
}

}  // namespace
}  // namespace folio
