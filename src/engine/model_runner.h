// Turns a SchedulerOutput into the executor's ForwardBatch (the step's block copies, then the
// flat varlen batch: tokens, positions, slots from each chunk's block table, sequences, the rows
// that sample) and runs it. It reads nothing but the scheduler's output.
#pragma once

#include "engine/scheduler_output.h"
#include "executor/executor.h"

namespace folio {

class ModelRunner {
 public:
  explicit ModelRunner(Executor& executor) : executor_(executor) {}

  // One row per sampling chunk, in chunk order: logits without a plan, the executor's tokens
  // with one (plan->rows in the same order). Valid until the next call.
  StepResult execute(const SchedulerOutput& output, const SamplingPlan* plan);

 private:
  void prepare(const SchedulerOutput& output);

  Executor& executor_;
  ForwardBatch batch_;
};

}  // namespace folio
