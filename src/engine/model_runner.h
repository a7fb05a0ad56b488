// Turns a SchedulerOutput into the executor's ForwardBatch (the step's block copies, then the
// flat varlen batch: tokens, positions, slots from each chunk's block table, sequences, the rows
// that sample) and runs it. It reads nothing but the scheduler's output.
#pragma once

#include "engine/scheduler_output.h"
#include "executor/executor.h"

namespace folio {

class ModelRunner {
 public:
  explicit ModelRunner(Executor& executor)
      : executor_(executor),
        verify_rows_as_decodes_(executor.capabilities().verify_rows_as_decodes),
        graph_decode_seqs_(executor.capabilities().graph_decode_seqs) {}

  // One row per sampling chunk, in chunk order: logits without a plan, the executor's tokens
  // with one (plan->rows in the same order). Valid until the next call.
  StepResult execute(const SchedulerOutput& output, const SamplingPlan* plan);

 private:
  void prepare(const SchedulerOutput& output);

  Executor& executor_;
  // Whether this step's verification chunks go as one-token rows: always where the executor
  // asks for it, else where the step is decodes only and its rows fit a captured graph.
  bool rows_as_decodes(const SchedulerOutput& output) const;

  const bool verify_rows_as_decodes_;
  const int32_t graph_decode_seqs_;
  ForwardBatch batch_;
};

}  // namespace folio
