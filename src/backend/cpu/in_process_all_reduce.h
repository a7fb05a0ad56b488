// The all-reduce of tensor-parallel ranks that are threads of one process (the CPU's ranks,
// backend/cpu/tensor_parallel_executor.h): every rank hands in its own buffer and gets back the
// element-wise sum over all ranks, with no shared scratch.
//
// Each rank sums one slice of the elements over every rank's buffer, in rank order, into its
// own buffer (reduce-scatter), then copies the other ranks' finished slices (all-gather), the
// way a ring all-reduce splits the work. Every element is added in rank order whoever adds it,
// so all ranks get the same bits and a run is reproducible whatever the thread timing.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace folio::cpu {

class InProcessAllReduce {
 public:
  explicit InProcessAllReduce(int32_t num_ranks);

  int32_t num_ranks() const { return num_ranks_; }
  // Called by every rank, each from its own thread, with buffers of the same n floats.
  void sum(int32_t rank, float* data, size_t n);

 private:
  // Every rank waits here until all have arrived: a spin of a few microseconds (a decode step
  // crosses ~180 of these), then yields, then a futex wait so that ranks outnumbering cores do
  // not starve. Pausing alone for the whole spin made two ranks 30x slower on two cores shared
  // with another busy process: the spinner held the core the other rank needed for ~1 ms a wait.
  void arrive_and_wait();
  static constexpr int32_t kPauses = 500;

  int32_t num_ranks_;
  int32_t spins_;  // 0 when the ranks outnumber the hardware threads: a spinning rank would hold
                   // the core the last one needs
  std::atomic<int32_t> arrived_{0};
  std::atomic<uint32_t> generation_{0};
  std::vector<float*> buffers_;
};

}  // namespace folio::cpu
