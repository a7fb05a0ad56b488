#include "backend/cpu/in_process_all_reduce.h"

#include <algorithm>
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace folio::cpu {

InProcessAllReduce::InProcessAllReduce(int32_t num_ranks)
    : num_ranks_(num_ranks),
      spins_(static_cast<unsigned>(num_ranks) <= std::thread::hardware_concurrency() ? 20000 : 0),
      buffers_(static_cast<size_t>(num_ranks), nullptr) {}

void InProcessAllReduce::arrive_and_wait() {
  const uint32_t generation = generation_.load(std::memory_order_acquire);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) == num_ranks_ - 1) {
    arrived_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);  // publishes every rank's writes
    generation_.notify_all();
    return;
  }
  for (int spins = 0; generation_.load(std::memory_order_acquire) == generation; ++spins) {
    if (spins < std::min(spins_, kPauses)) {
#if defined(__x86_64__)
      _mm_pause();
#endif
    } else if (spins < spins_) {
      // Past a few microseconds the last rank may be waiting for this core (another process
      // took the other one): a yield hands it over, where a pause would burn the time slice.
      std::this_thread::yield();
    } else {
      generation_.wait(generation, std::memory_order_acquire);
    }
  }
}

void InProcessAllReduce::sum(int32_t rank, float* data, size_t n) {
  if (num_ranks_ == 1) return;
  const auto ranks = static_cast<size_t>(num_ranks_);
  const auto slice_begin = [&](size_t r) { return n * r / ranks; };
  buffers_[static_cast<size_t>(rank)] = data;
  arrive_and_wait();  // every buffer is in
  // Reduce-scatter: this rank's slice of every buffer is read and written by this rank alone.
  const auto me = static_cast<size_t>(rank);
  for (size_t i = slice_begin(me); i < slice_begin(me + 1); ++i) {
    float s = buffers_[0][i];
    for (size_t r = 1; r < ranks; ++r) s += buffers_[r][i];
    data[i] = s;
  }
  arrive_and_wait();  // every slice is summed
  // All-gather: the other slices from the ranks that summed them (no one reads them here).
  for (size_t r = 0; r < ranks; ++r) {
    if (r == me) continue;
    std::copy(buffers_[r] + slice_begin(r), buffers_[r] + slice_begin(r + 1), data + slice_begin(r));
  }
  arrive_and_wait();  // no one reads this buffer any more: the caller may change it
}

}  // namespace folio::cpu
