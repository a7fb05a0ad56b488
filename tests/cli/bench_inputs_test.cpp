// The parsing and workload pieces behind `folio run` / `folio bench batch` options: sizes users
// type, and seeded workloads that must be reproducible and keep their promised shape.
#include <gtest/gtest.h>

#include <set>

#include "cli/bench_workload.h"
#include "cli/byte_size.h"

namespace folio::cli {
namespace {

TEST(ByteSize, AcceptsBytesAndBinarySuffixes) {
  EXPECT_EQ(parse_byte_size("4096").value(), 4096);
  EXPECT_EQ(parse_byte_size("512M").value(), int64_t{512} << 20);
  EXPECT_EQ(parse_byte_size("2G").value(), int64_t{2} << 30);
  EXPECT_EQ(parse_byte_size("2g").value(), int64_t{2} << 30);
  EXPECT_EQ(parse_byte_size("1.5GiB").value(), int64_t{3} << 29);
  EXPECT_EQ(parse_byte_size("64KB").value(), int64_t{64} << 10);
  EXPECT_EQ(parse_byte_size("1T").value(), int64_t{1} << 40);
}

TEST(ByteSize, RefusesWhatIsNotASize) {
  for (const char* text : {"", "M", "12X", "-1G", "0", "0.1", "1..2G", "nan", "inf", "1e9", "2 G", "99999999999T"}) {
    EXPECT_FALSE(parse_byte_size(text).has_value()) << text;
  }
  EXPECT_NE(parse_byte_size("12X").error().find("512M"), std::string::npos);  // shows the form
}

// Token i at position i: equal slices mean equal offsets.
std::vector<int32_t> counting_corpus(int32_t n) {
  std::vector<int32_t> corpus(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) corpus[static_cast<size_t>(i)] = i;
  return corpus;
}

TEST(BenchWorkload, MixedLengthsAreSeededClippedAndDistinct) {
  const std::vector<int32_t> corpus = counting_corpus(20000);
  MixedLengthShape shape;
  const std::vector<WorkloadRequest> a = make_mixed_length_workload(shape, corpus, 20000);
  const std::vector<WorkloadRequest> b = make_mixed_length_workload(shape, corpus, 20000);
  ASSERT_EQ(a.size(), 64u);
  double prompt_sum = 0, output_sum = 0;
  std::set<std::vector<int32_t>> first_blocks;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].prompt, b[i].prompt);
    EXPECT_EQ(a[i].max_tokens, b[i].max_tokens);
    EXPECT_GE(a[i].prompt.size(), 4u);
    EXPECT_LE(a[i].prompt.size(), 1024u);
    EXPECT_GE(a[i].max_tokens, 4);
    EXPECT_LE(a[i].max_tokens, 512);
    prompt_sum += static_cast<double>(a[i].prompt.size());
    output_sum += a[i].max_tokens;
    first_blocks.insert(std::vector<int32_t>(a[i].prompt.begin(), a[i].prompt.begin() + 4));
  }
  // ShareGPT-like means, loosely: 64 lognormal draws scatter.
  EXPECT_GT(prompt_sum / 64, 100);
  EXPECT_LT(prompt_sum / 64, 320);
  EXPECT_GT(output_sum / 64, 100);
  EXPECT_LT(output_sum / 64, 280);
  EXPECT_EQ(first_blocks.size(), a.size());  // no accidental prefix sharing
}

TEST(BenchWorkload, ScaleShrinksLengths) {
  MixedLengthShape shape;
  shape.scale = 0.25;
  for (const WorkloadRequest& r : make_mixed_length_workload(shape, {}, 500)) {
    EXPECT_LE(r.prompt.size(), 256u);
    EXPECT_LE(r.max_tokens, 128);
    for (int32_t t : r.prompt) EXPECT_LT(t, 500);  // random ids without a corpus
  }
}

TEST(BenchWorkload, SharedPrefixRequestsShareExactlyTheSystemPrompt) {
  const std::vector<int32_t> corpus = counting_corpus(20000);
  SharedPrefixShape shape;
  const std::vector<WorkloadRequest> requests = make_shared_prefix_workload(shape, corpus, 20000);
  ASSERT_EQ(requests.size(), 64u);
  const std::vector<int32_t> prefix(corpus.begin(), corpus.begin() + 1000);
  for (const WorkloadRequest& r : requests) {
    ASSERT_GE(r.prompt.size(), 1020u);
    ASSERT_LE(r.prompt.size(), 1040u);
    EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), r.prompt.begin()));
    EXPECT_EQ(r.max_tokens, 32);
  }
}

}  // namespace
}  // namespace folio::cli
