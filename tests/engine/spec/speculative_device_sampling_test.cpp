// Speculation on an executor that samples on its device (the GPU's path, stood in for by the
// CPU executor with the sample kernel's semantics, support/sampling_executor.h): a verification
// row j is drawn at the stream offset plain decoding uses for that token, with the proposals
// before it counted by the penalties, so sampling then comparing gives seeded and penalized
// requests exactly the tokens they get without speculation, with every row sampled on the
// device (n-gram lookup and a draft). Only unseeded requests with a draft's proposals, which
// rejection sampling serves better, take their logits to the host.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

#include "backend/cpu/cpu_executor.h"
#include "engine/engine.h"
#include "engine/spec/draft_model_proposer.h"
#include "engine/spec/ngram_proposer.h"
#include "support/default_model_fixture.h"
#include "support/sampling_executor.h"

namespace folio {
namespace {

class SpeculativeDeviceSamplingTest : public testing::SmallModelTest {
 protected:
  static int32_t num_blocks() { return 2048; }

  struct Outcome {
    std::vector<std::vector<int32_t>> tokens;
    SpeculationMetrics speculation;
    int64_t device_steps = 0;
    int64_t host_steps = 0;
  };

  // Runs the requests (three arrivals per step) through a fresh sampling executor; with a
  // proposer when num_speculative > 0 (draft: the target's own weights drafting for it).
  static Outcome run(const std::vector<std::vector<int32_t>>& prompts, const std::vector<RequestParams>& params,
                     int32_t num_speculative, bool draft) {
    testing::SamplingExecutor executor(*model_, *backend_, num_blocks());
    cpu::CpuExecutor draft_executor(*model_, *backend_, 1024, 16, 0);
    NgramProposer ngram(NgramConfig{});
    DraftModelProposer draft_proposer(draft_executor);
    Proposer* proposer = num_speculative == 0 ? nullptr : draft ? static_cast<Proposer*>(&draft_proposer) : &ngram;
    EngineConfig config;
    config.scheduler.max_num_batched_tokens = 96;
    config.speculative.num_tokens = num_speculative;
    config.speculative.adaptive = false;
    Engine engine(executor, *tokenizer_, config, proposer);
    std::map<RequestId, size_t> index;
    Outcome out;
    out.tokens.resize(prompts.size());
    size_t next = 0;
    while (next < prompts.size() || engine.has_unfinished_requests()) {
      for (int a = 0; a < 3 && next < prompts.size(); ++a, ++next) {
        index[engine.add_request(prompts[next], params[next]).value()] = next;
      }
      for (const RequestOutput& o : engine.step()) {
        auto& tokens = out.tokens[index.at(o.id)];
        tokens.insert(tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      }
      const Status status = engine.check_invariants();
      EXPECT_TRUE(status) << status.message();
      if (!status) break;
    }
    engine.step();
    EXPECT_EQ(engine.metrics().kv.num_used_blocks, 0);
    EXPECT_EQ(proposer != nullptr ? proposer->num_used_blocks() : 0, 0);
    out.speculation = engine.metrics().speculation;
    out.device_steps = executor.sample_steps;
    out.host_steps = executor.host_rows_steps;
    return out;
  }

  // Sixteen requests of mixed settings: seeded sampled (top-p, top-k, min-p), some penalized,
  // and penalized greedy ones; `seeded` false drops the seeds of the sampled ones.
  std::vector<RequestParams> mixed_params(bool seeded) const {
    std::vector<RequestParams> params;
    for (int i = 0; i < 16; ++i) {
      RequestParams p = greedy(12 + (i % 4) * 5);
      if (i % 4 != 3) {
        p.sampling.temperature = i % 2 == 0 ? 0.7f : 1.0f;
        p.sampling.top_p = i % 3 == 0 ? 0.9f : 1.0f;
        p.sampling.top_k = i % 3 == 1 ? 40 : -1;
        p.sampling.min_p = i % 3 == 2 ? 0.05f : 0.0f;
        if (seeded) p.sampling.seed = 1000 + i;
      }
      if (i % 3 == 0) p.sampling.repetition_penalty = 1.2f;
      if (i % 5 == 1) p.sampling.presence_penalty = 0.4f;
      if (i % 5 == 2) p.sampling.frequency_penalty = 0.3f;
      params.push_back(p);
    }
    return params;
  }

  std::vector<std::vector<int32_t>> prompts() const {
    std::vector<std::vector<int32_t>> out;
    for (int i = 0; i < 16; ++i) out.push_back(slice(211 * i, 6 + (i * 29) % 90));
    return out;
  }
};

TEST_F(SpeculativeDeviceSamplingTest, SeededAndPenalizedRowsGiveTheSameTokensAllOnTheDevice) {
  const auto p = prompts();
  const auto params = mixed_params(true);
  const Outcome plain = run(p, params, 0, false);
  EXPECT_EQ(plain.host_steps, 0);
  for (bool draft : {false, true}) {
    const Outcome spec = run(p, params, 4, draft);
    const char* what = draft ? "draft" : "ngram";
    for (size_t i = 0; i < p.size(); ++i) EXPECT_EQ(spec.tokens[i], plain.tokens[i]) << what << ": request " << i;
    EXPECT_EQ(spec.host_steps, 0) << what;
    // Sampled text of random weights repeats little: n-gram lookup finds fewer proposals.
    EXPECT_GT(spec.speculation.num_draft_tokens, draft ? 100 : 40) << what;
    EXPECT_GT(spec.speculation.num_accepted_tokens, draft ? 20 : 4) << what;
  }
}

TEST_F(SpeculativeDeviceSamplingTest, OnlyUnseededDraftProposalsGoToTheHost) {
  const auto p = prompts();
  const auto params = mixed_params(false);
  const Outcome ngram = run(p, params, 4, false);
  EXPECT_EQ(ngram.host_steps, 0);  // n-gram proposals have no draft distribution: compared on the device
  EXPECT_GT(ngram.speculation.num_draft_tokens, 40);
  const Outcome draft = run(p, params, 4, true);
  EXPECT_GT(draft.host_steps, 0);  // rejection sampling with the draft's q, on the host
  EXPECT_GT(draft.device_steps, 0);
  EXPECT_GT(draft.speculation.num_accepted_tokens, 20);
  for (size_t i = 0; i < p.size(); ++i) {
    EXPECT_EQ(draft.tokens[i].size(), ngram.tokens[i].size()) << "request " << i;  // max_tokens, ignore_eos
  }
}

}  // namespace
}  // namespace folio
