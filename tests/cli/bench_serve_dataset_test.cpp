// Prompts of `folio bench serve`: the server must see the lengths the workload promises.
#ifdef FOLIO_HAS_SERVER
#include <gtest/gtest.h>

#include <filesystem>

#include "cli/bench_serve_dataset.h"
#include "cli/bench_workload.h"
#include "model/gguf_file.h"
#include "model/gguf_tokenizer.h"
#include "support/test_paths.h"
#include "support/tiny_model.h"

namespace folio::cli {
namespace {

int32_t server_count(const Tokenizer& tokenizer, const std::string& text) {
  return static_cast<int32_t>(tokenizer.encode(text, /*add_special=*/true, /*parse_special=*/false).size());
}

// Every length from 1 to max_len, and a few long ones: exact in (nearly) every case.
void expect_exact_lengths(const Tokenizer& tokenizer, int32_t max_len) {
  RandomPromptTexts texts(tokenizer, 11);
  int exact = 0, total = 0;
  std::vector<int32_t> lengths;
  for (int32_t n = 1; n <= max_len; ++n) lengths.push_back(n);
  for (int32_t n : {511, 1024, 2000}) lengths.push_back(n);
  for (const int32_t n : lengths) {
    const int32_t got = server_count(tokenizer, texts.make(n));
    ++total;
    exact += got == n ? 1 : 0;
    EXPECT_NEAR(got, n, 1) << "asked for " << n;
  }
  EXPECT_GE(exact, total * 99 / 100) << exact << " of " << total << " exact";
}

TEST(RandomPromptTexts, TinyTokenizerHitsTheLength) {
  auto tiny = folio::testing::TinyModel::create().value();
  expect_exact_lengths(tiny->tokenizer(), 200);
}

TEST(RandomPromptTexts, DefaultModelTokenizerHitsTheLength) {
  const std::string path = folio::testing::default_model_path();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << folio::testing::missing_model_message(path);
  const GgufFile file = GgufFile::open(path).value();
  const Tokenizer tokenizer = tokenizer_from_gguf(file).value();
  expect_exact_lengths(tokenizer, 300);
}

TEST(ServeRequests, FixedLengthsAreExactAndSeeded) {
  auto tiny = folio::testing::TinyModel::create().value();
  ServeDatasetOptions options;
  options.kind = ServeDataset::kFixed;
  options.num_prompts = 5;
  options.input_len = 40;
  options.output_len = 9;
  options.seed = 3;
  const std::vector<ServeBenchRequest> a = make_serve_requests(options, tiny->tokenizer());
  ASSERT_EQ(a.size(), 5u);
  for (const ServeBenchRequest& r : a) {
    EXPECT_EQ(r.prompt_tokens, 40);
    EXPECT_EQ(server_count(tiny->tokenizer(), r.prompt), 40);
    EXPECT_EQ(r.max_tokens, 9);
  }
  EXPECT_NE(a[0].prompt, a[1].prompt);
  const std::vector<ServeBenchRequest> b = make_serve_requests(options, tiny->tokenizer());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].prompt, b[i].prompt);
  options.seed = 4;
  EXPECT_NE(make_serve_requests(options, tiny->tokenizer())[0].prompt, a[0].prompt);
}

TEST(ServeRequests, ShareGptLikeLengthsAreBenchBatchs) {
  auto tiny = folio::testing::TinyModel::create().value();
  ServeDatasetOptions options;
  options.num_prompts = 12;
  options.scale = 0.3;
  options.seed = 2026;
  MixedLengthShape shape;
  shape.num_requests = 12;
  shape.scale = 0.3;
  shape.seed = 2026;
  const std::vector<WorkloadRequest> workload = make_mixed_length_workload(shape, {}, tiny->tokenizer().vocab_size());
  const std::vector<ServeBenchRequest> requests = make_serve_requests(options, tiny->tokenizer());
  ASSERT_EQ(requests.size(), workload.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_NEAR(requests[i].prompt_tokens, static_cast<int32_t>(workload[i].prompt.size()), 1) << i;
    EXPECT_EQ(requests[i].max_tokens, workload[i].max_tokens) << i;
  }
}

}  // namespace
}  // namespace folio::cli
#endif  // FOLIO_HAS_SERVER
