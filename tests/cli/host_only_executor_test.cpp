// HostOnlyExecutor (`folio bench host`): the engine runs over it as over a device that samples:
// every request gets its tokens, every step's tokens come from the executor, the KV blocks all
// come back, and the tokens are the executor's fixed draws (the same run twice gives the same
// tokens; they are not one repeated value).
#include "cli/host_only_executor.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "engine/engine.h"
#include "support/tiny_model.h"

namespace folio {
namespace {

std::map<RequestId, std::vector<int32_t>> run_all(const testing::TinyModel& tiny, const ModelWeights& model,
                                                  cli::HostOnlyExecutor& executor, int32_t* full_decode_steps) {
  EngineConfig config;
  config.max_model_len = 80;
  config.scheduler.max_num_seqs = 12;
  config.scheduler.max_num_batched_tokens = 64;  // the prompts arrive in chunks
  Engine engine(executor, tiny.tokenizer(), config);
  RequestParams params;
  params.sampling.temperature = 0.0f;
  params.ignore_eos = true;
  params.max_tokens = 25;
  std::map<RequestId, std::vector<int32_t>> tokens;
  for (int32_t i = 0; i < 12; ++i) {
    std::vector<int32_t> prompt(40);
    for (int32_t j = 0; j < 40; ++j) prompt[static_cast<size_t>(j)] = (7 * i + 3 * j) % model.config().vocab_size;
    Expected<RequestId> id = engine.add_request(prompt, params);
    EXPECT_TRUE(id) << id.error();
    if (id) tokens[*id];
  }
  *full_decode_steps = 0;
  int64_t steps_with_rows = 0;
  while (engine.has_unfinished_requests()) {
    for (const RequestOutput& out : engine.step()) {
      tokens[out.id].insert(tokens[out.id].end(), out.new_tokens.begin(), out.new_tokens.end());
    }
    if (executor.last_logit_rows() > 0) ++steps_with_rows;
    if (executor.last_tokens() == 12 && executor.last_logit_rows() == 12) ++*full_decode_steps;
  }
  const Status invariants = engine.check_invariants();
  EXPECT_TRUE(invariants) << invariants.message();
  const EngineMetrics metrics = engine.metrics();
  EXPECT_EQ(metrics.kv.num_used_blocks, 0) << "every block comes back";
  EXPECT_EQ(metrics.num_device_sampled_steps, steps_with_rows) << "every token is the executor's";
  return tokens;
}

TEST(HostOnlyExecutor, DrivesTheEngineToTheEndWithItsOwnTokens) {
  Expected<std::unique_ptr<testing::TinyModel>> tiny = testing::TinyModel::create();
  ASSERT_TRUE(tiny) << tiny.error();
  const ModelWeights& model = (*tiny)->model();
  const int32_t vocab = model.config().vocab_size;
  cli::HostOnlyExecutor first(model.config(), 12 * 6 + 1, 16);  // 80 tokens: 5 blocks a request
  EXPECT_TRUE(first.capabilities().samples_on_device);
  int32_t full_decode_steps = 0;
  const auto a = run_all(**tiny, model, first, &full_decode_steps);
  ASSERT_EQ(a.size(), 12u);
  std::set<int32_t> distinct;
  for (const auto& [id, tokens] : a) {
    EXPECT_EQ(tokens.size(), 25u) << "request " << id;
    for (int32_t t : tokens) {
      EXPECT_GE(t, 0);
      EXPECT_LT(t, vocab);
      distinct.insert(t);
    }
  }
  EXPECT_GT(distinct.size(), 50u) << "the draws are spread over the vocabulary";
  EXPECT_GT(full_decode_steps, 15) << "most of the run decodes the whole batch";

  cli::HostOnlyExecutor second(model.config(), 12 * 6 + 1, 16);
  int32_t again = 0;
  const auto b = run_all(**tiny, model, second, &again);
  EXPECT_EQ(a, b) << "the same run gives the same tokens";
  EXPECT_EQ(full_decode_steps, again);
}

}  // namespace
}  // namespace folio
