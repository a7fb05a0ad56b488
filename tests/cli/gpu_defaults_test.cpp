// The GPU's serving defaults: decode-graph buckets, how many requests run at once for a pool,
// and what the engine options turn into when the flags are not given.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "cli/engine_options.h"
#include "executor/decode_graph_buckets.h"

namespace folio::cli {
namespace {

TEST(DecodeGraphBucket, PowersOfTwoUpTo32ThenMultiplesOf32) {
  const int32_t expected[][2] = {{1, 1},   {2, 2},   {3, 4},   {5, 8},    {9, 16},    {17, 32},    {32, 32},
                                 {33, 64}, {64, 64}, {65, 96}, {97, 128}, {300, 320}, {1000, 1024}};
  for (const auto& [n, bucket] : expected) EXPECT_EQ(decode_graph_bucket(n), bucket) << n;
  for (int32_t n = 1; n <= 1024; ++n) {
    const int32_t b = decode_graph_bucket(n);
    EXPECT_GE(b, n);
    EXPECT_EQ(decode_graph_bucket(b), b) << "a bucket is its own bucket";
    if (n > 32) {
      EXPECT_LT(b - n, kDecodeGraphStep) << "fewer than 32 padded rows past 32";
    }
  }
}

TEST(CudaMaxNumSeqs, WhatThePoolHoldsAtMost1024InGraphBuckets) {
  EXPECT_EQ(cuda_max_num_seqs(830'000), 1024);  // Llama-3-8B shape on an H200
  EXPECT_EQ(cuda_max_num_seqs(280'000), 544);   // 70B INT4 on an H200: 546 sequences fit
  EXPECT_EQ(cuda_max_num_seqs(int64_t{1} << 40), 1024);
  EXPECT_EQ(cuda_max_num_seqs(100), 16);       // a tiny pool still runs a few
  EXPECT_EQ(cuda_max_num_seqs(24 * 512), 16);  // 24 fit: the bucket below
  EXPECT_EQ(decode_graph_bucket(cuda_max_num_seqs(50'000)), cuda_max_num_seqs(50'000));
}

// The options keep pointers into the App (to tell given flags from defaults): it lives as long.
struct Parsed {
  std::unique_ptr<CLI::App> app = std::make_unique<CLI::App>();
  EngineOptions options;
};

std::unique_ptr<Parsed> parse(std::vector<std::string> args) {
  auto p = std::make_unique<Parsed>();
  add_engine_options(*p->app, p->options);
  std::vector<std::string> argv{"folio"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<const char*> raw;
  for (const std::string& a : argv) raw.push_back(a.c_str());
  p->app->parse(static_cast<int>(raw.size()), raw.data());
  p->options.device.device = "cpu";  // to_engine_config refuses cuda in a build without it
  return p;
}

TEST(EngineDefaults, CpuKeepsItsDefaultsAndTheFlagsWin) {
  std::unique_ptr<Parsed> p = parse({});
  Expected<EngineConfig> config = to_engine_config(p->options, 0);
  ASSERT_TRUE(config) << config.error();
  EXPECT_EQ(config->scheduler.max_num_seqs, 64);
  EXPECT_EQ(config->scheduler.max_num_batched_tokens, 512);
  EXPECT_EQ(config->scheduler.max_prefill_tokens_while_decoding, 0);
  EXPECT_EQ(config->scheduler.admission_reserve, 0.0);
  EXPECT_EQ(config->scheduler.min_deferred_prefix_tokens, 256);

  p = parse({"--max-num-seqs", "7", "--max-prefill-tokens-while-decoding", "96", "--admission-reserve", "0.35",
             "--prefix-wait-tokens", "0"});
  config = to_engine_config(p->options, 0);
  ASSERT_TRUE(config) << config.error();
  EXPECT_EQ(config->scheduler.max_num_seqs, 7);
  EXPECT_EQ(config->scheduler.max_prefill_tokens_while_decoding, 96);
  EXPECT_DOUBLE_EQ(config->scheduler.admission_reserve, 0.35);
  EXPECT_DOUBLE_EQ(config->scheduler.admission_reserve_floor, 0.05);
  EXPECT_EQ(config->scheduler.min_deferred_prefix_tokens, 0);
}

TEST(EngineDefaults, CudaRunsManyRequestsAndCapsPromptTokensBesideDecodes) {
  std::unique_ptr<Parsed> p = parse({});
  p->options.device.device = "cuda";
  if (!check_device(p->options.device)) GTEST_SKIP() << "this folio was built without CUDA";
  Expected<EngineConfig> config = to_engine_config(p->options, 0);
  ASSERT_TRUE(config) << config.error();
  EXPECT_EQ(config->scheduler.max_num_seqs, kCudaMaxNumSeqs);  // the pool may lower it (cuda_max_num_seqs)
  EXPECT_EQ(config->scheduler.max_num_batched_tokens, kCudaBatchedTokens);
  EXPECT_EQ(config->scheduler.max_prefill_tokens_while_decoding, kCudaPrefillTokensWhileDecoding);
  EXPECT_EQ(config->scheduler.admission_reserve, kCudaAdmissionReserve);
  // Given explicitly, 0 turns it off on the GPU too.
  std::unique_ptr<Parsed> off = parse({"--admission-reserve", "0"});
  off->options.device.device = "cuda";
  Expected<EngineConfig> off_config = to_engine_config(off->options, 0);
  ASSERT_TRUE(off_config) << off_config.error();
  EXPECT_EQ(off_config->scheduler.admission_reserve, 0.0);
  const ExecutorRequest request = to_executor_request(p->options, *config);
  EXPECT_EQ(request.max_num_seqs, kCudaMaxNumSeqs);  // graphs and buffers for the most it may run
}

}  // namespace
}  // namespace folio::cli
