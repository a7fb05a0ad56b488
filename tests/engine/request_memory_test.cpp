// Request-level data (stop strings, stop token ids, sampling settings) is shared by all the
// sequences of a request, not copied into each (issue 10: large stop lists used to cost 6.6 MB
// and 3.6 MB per extra sequence, so one request with n = 8 could ask for tens of megabytes).
// Measured with glibc's allocator statistics around add_request and the step that forks.
#include <malloc.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "support/cpu_engine.h"
#include "support/tiny_model.h"

namespace folio {
namespace {

TEST(RequestMemory, SequencesOfARequestShareItsStopLists) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's allocator does not report through mallinfo2";
#endif
  auto tiny = testing::TinyModel::create();
  ASSERT_TRUE(tiny) << tiny.error();
  cpu::CpuBackend backend(1);
  testing::CpuEngine cpu((*tiny)->model(), backend, (*tiny)->tokenizer());
  RequestParams params;
  params.max_tokens = 4;
  params.ignore_eos = true;
  params.sampling.temperature = 1.0f;
  params.sampling.seed = 3;
  params.n = 8;
  for (int i = 0; i < 20000; ++i)
    params.stop.push_back("stop string number " + std::to_string(i) + std::string(60, 'x'));
  for (int i = 0; i < 200000; ++i) params.stop_token_ids.push_back(i % 300);
  const double list_bytes = 20000.0 * (80 + sizeof(std::string)) + 200000.0 * 4;  // ~2.9 MB

  // In-use heap bytes plus mmap'ed blocks (vectors of this size are allocated with mmap).
  auto heap = [] {
    const struct mallinfo2 m = mallinfo2();
    return static_cast<double>(m.uordblks) + static_cast<double>(m.hblkhd);
  };
  const double before = heap();
  ASSERT_TRUE(cpu.engine.add_request({1, 2, 3, 4, 5}, params));
  cpu.engine.step();  // the prefill, then the fork into 8 sequences
  const double grown = heap() - before;
  std::printf("n = 8 with %.1f MB of stop lists: the engine grew by %.1f MB\n", list_bytes / 1e6, grown / 1e6);
  // One copy of the lists (the request's), plus the engine's own per-step state: far below
  // the 8 copies (23 MB) that per-sequence copies would take.
  EXPECT_LT(grown, 2.5 * list_bytes);
  while (cpu.engine.has_unfinished_requests()) cpu.engine.step();
}

}  // namespace
}  // namespace folio
