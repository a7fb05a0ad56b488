// An executor that runs no model, for measuring what the engine itself costs a step (`folio
// bench host`, issue 16: the host's share of a GPU step). It samples "on the device" as the CUDA
// executor does (Capabilities::samples_on_device), so the engine builds the same sampling plans;
// each logit row's token is a fixed hash of the row's place in the run (never a function of a
// model), and block copies and K/V writes are only counted. Scheduling, block tables, the batch,
// the sampling plan, the tokens' bookkeeping and detokenization are then all a step costs.
#pragma once

#include <cstdint>
#include <vector>

#include "executor/executor.h"
#include "model/model_config.h"

namespace folio::cli {

class HostOnlyExecutor final : public Executor {
 public:
  // A pool of num_blocks blocks (the null block included) of block_size tokens, in fp16.
  HostOnlyExecutor(const ModelConfig& config, int32_t num_blocks, int32_t block_size);

  const ModelConfig& config() const override { return config_; }
  KvPoolLayout kv_pool() const override { return layout_; }
  Capabilities capabilities() const override;
  StepResult execute(const ForwardBatch& batch, const SamplingPlan* plan) override;

  // The last batch's tokens and logit rows: what kind of step the engine just ran.
  int32_t last_tokens() const { return last_tokens_; }
  int32_t last_logit_rows() const { return last_logit_rows_; }
  int64_t block_copies() const { return block_copies_; }

 private:
  ModelConfig config_;
  KvPoolLayout layout_;
  std::vector<SampledToken> tokens_;
  std::vector<float> logits_;  // zeros, for the rare step that asks for logits
  uint64_t drawn_ = 0;
  int32_t last_tokens_ = 0;
  int32_t last_logit_rows_ = 0;
  int64_t block_copies_ = 0;
};

}  // namespace folio::cli
