// Sliding-window block tables end to end (kv/kv_groups.h): the Gemma-3-shaped tiny model (two
// local layers of an 8-token window, one global) served with its window groups releasing blocks
// gives the same tokens and logits as keeping every block, and holds far fewer blocks at length.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "support/tiny_engine_fixture.h"

namespace folio::testing {
namespace {

class EngineSlidingWindow : public TinyEngineTest {
 protected:
  struct Run {
    std::vector<std::vector<int32_t>> tokens;  // per request
    std::vector<std::vector<float>> logprobs;  // per request, each token's
    int64_t peak_kv_bytes = 0;                 // blocks in use x bytes per block, at the fullest step
  };

  // ngram: speculative decoding (k = 4), whose verification allocates twice in a step and rolls
  // back: nothing the verified rows read may be released.
  static Run run(bool release, int32_t block_size, bool ngram, int32_t num_prompts, int32_t prompt_length,
                 int32_t max_tokens) {
    Setup setup;
    setup.gemma = true;
    setup.kv.block_size = block_size;
    setup.kv.kv_cache_bytes = 2048 * block_bytes(block_size, KvFormat::kFp16, true);
    setup.kv.release_window_blocks = release;
    setup.config.scheduler.max_num_batched_tokens = 16;  // chunked prefill: release between chunks
    NgramProposer proposer{NgramConfig{}};
    if (ngram) {
      setup.config.speculative.num_tokens = 4;
      setup.config.speculative.adaptive = false;
    }
    CpuEngine cpu(model_for(setup), *backend_, tiny_->tokenizer(), setup.config, setup.kv, ngram ? &proposer : nullptr);
    Engine& engine = cpu.engine;
    RequestParams params;
    params.max_tokens = max_tokens;
    params.ignore_eos = true;
    params.sampling.temperature = 0.0f;
    params.sampling.logprobs = 0;
    std::vector<RequestId> ids;
    for (int32_t r = 0; r < num_prompts; ++r) {
      std::vector<int32_t> prompt;
      // Repeating runs, so that n-gram lookup proposes (and is sometimes right).
      for (int32_t t = 0; t < prompt_length; ++t) prompt.push_back(1 + (t % 11 * 7 + r * 13) % 60);
      Expected<RequestId> id = engine.add_request(prompt, params);
      EXPECT_TRUE(id) << id.error();
      ids.push_back(*id);
    }
    Run result;
    result.tokens.resize(ids.size());
    result.logprobs.resize(ids.size());
    const KvPoolLayout pool = cpu.executor.kv_pool();
    while (engine.has_unfinished_requests()) {
      for (const RequestOutput& out : engine.step()) {
        const size_t r = static_cast<size_t>(std::ranges::find(ids, out.id) - ids.begin());
        result.tokens[r].insert(result.tokens[r].end(), out.new_tokens.begin(), out.new_tokens.end());
        for (const SampleResult& sample : out.new_samples) result.logprobs[r].push_back(sample.logprob);
      }
      const Status status = engine.check_invariants();
      EXPECT_TRUE(status.is_ok()) << status.message();
      result.peak_kv_bytes = std::max(result.peak_kv_bytes,
                                      static_cast<int64_t>(engine.metrics().kv.num_used_blocks) * pool.bytes_per_block);
    }
    return result;
  }
};

TEST_F(EngineSlidingWindow, ReleasingWindowBlocksChangesNoTokenAndHoldsFewerBytes) {
  for (const auto& [block_size, ngram] :
       {std::pair{4, false}, std::pair{16, false}, std::pair{4, true}, std::pair{16, true}}) {
    const Run kept = run(false, block_size, ngram, 3, 70, 30);
    const Run released = run(true, block_size, ngram, 3, 70, 30);
    EXPECT_EQ(released.tokens, kept.tokens) << "block size " << block_size << " ngram " << ngram;
    EXPECT_EQ(released.logprobs, kept.logprobs) << "block size " << block_size << " ngram " << ngram;
    for (const std::vector<int32_t>& tokens : kept.tokens) EXPECT_EQ(tokens.size(), 30u);
    // 100 tokens each: the global layer keeps them all, each of the two local layers (a group
    // each) at most the window and the step's tokens, ceil((W - 1 + 16) / B) + 1 blocks.
    const int32_t window_blocks = (8 - 1 + 16 + block_size - 1) / block_size + 1;
    const int64_t bound = 3 * ((100 + block_size - 1) / block_size + 2 * window_blocks) *
                          kv_bytes_per_block(gemma_->model().config(), block_size);
    EXPECT_LE(released.peak_kv_bytes, bound) << "block size " << block_size;
    EXPECT_LT(released.peak_kv_bytes * 10, kept.peak_kv_bytes * 7)
        << "block size " << block_size << ": " << released.peak_kv_bytes << " vs " << kept.peak_kv_bytes;
  }
}

}  // namespace
}  // namespace folio::testing
