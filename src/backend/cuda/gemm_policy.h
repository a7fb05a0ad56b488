// How CublasLtGemm picks the kernel of a product (plain C++: the executor's options carry it).
#pragma once

#include <cstdint>

namespace folio::cuda {

struct GemmPolicy {
  // One cuBLASLt algorithm per weight shape, chosen at n = pinned_rows with split-K off, used
  // for every n: a row's result does not depend on the batch it is in. Off: cuBLASLt's
  // heuristic per (n, m, k), split-K included: faster at small n, batch-dependent bits.
  bool batch_invariant = true;
  int32_t pinned_rows = 512;
  // Which of the heuristic's split-free candidates at pinned_rows to pin (0: its first choice;
  // past the last candidate, the last). Benchmarks sweep it to find algorithms that serve
  // both decode and prefill.
  int32_t pinned_candidate = 0;
  // Off the invariant policy only: n <= 8 rows go to the weight-streaming GEMV (gemv.h).
  bool small_batch_gemv = true;
};

}  // namespace folio::cuda
