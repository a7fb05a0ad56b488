// Prompt lookup: the longest suffix n-gram's most recent earlier occurrence gives the proposal.
#include "engine/spec/ngram_proposer.h"

#include <gtest/gtest.h>

#include <vector>

namespace folio {
namespace {

std::vector<int32_t> lookup(const std::vector<int32_t>& tokens, int32_t k, NgramConfig config = {}) {
  return NgramProposer::lookup(tokens, k, config);
}

TEST(NgramProposerTest, ProposesWhatFollowedTheLongestMatch) {
  // Suffix "7 8 9" occurred at position 1; what followed was "10 11 12".
  const std::vector<int32_t> tokens = {6, 7, 8, 9, 10, 11, 12, 13, 5, 7, 8, 9};
  EXPECT_EQ(lookup(tokens, 3), (std::vector<int32_t>{10, 11, 12}));
  EXPECT_EQ(lookup(tokens, 10), (std::vector<int32_t>{10, 11, 12, 13, 5, 7, 8, 9}));  // up to the end
}

TEST(NgramProposerTest, PrefersTheLongerNgramOverAMoreRecentShorterOne) {
  // "2 3" matches at 0 (followed by 4); the 1-gram "3" also occurs later, followed by 9.
  const std::vector<int32_t> tokens = {2, 3, 4, 5, 3, 9, 2, 3};
  EXPECT_EQ(lookup(tokens, 1), (std::vector<int32_t>{4}));
  NgramConfig unigrams;
  unigrams.max_n = 1;
  EXPECT_EQ(lookup(tokens, 1, unigrams), (std::vector<int32_t>{9}));  // the most recent "3"
}

TEST(NgramProposerTest, NothingWhenNoNgramRepeats) {
  EXPECT_TRUE(lookup({1, 2, 3, 4, 5}, 4).empty());
  EXPECT_TRUE(lookup({1}, 4).empty());
  EXPECT_TRUE(lookup({}, 4).empty());
  NgramConfig long_only;
  long_only.min_n = 3;
  EXPECT_TRUE(lookup({1, 2, 9, 1, 2}, 4, long_only).empty());  // only a 2-gram repeats
}

TEST(NgramProposerTest, SearchesOnlyTheWindow) {
  std::vector<int32_t> tokens = {42, 43};
  for (int i = 0; i < 100; ++i) tokens.push_back(1000 + i);
  tokens.push_back(42);
  EXPECT_EQ(lookup(tokens, 1), (std::vector<int32_t>{43}));
  NgramConfig window;
  window.max_search_tokens = 50;
  EXPECT_TRUE(lookup(tokens, 1, window).empty());
}

}  // namespace
}  // namespace folio
