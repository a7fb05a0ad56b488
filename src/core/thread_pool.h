// A fixed set of worker threads for data-parallel loops. The calling thread takes part in
// every loop, so a pool of N threads uses N-1 workers plus the caller.
//
// A forward pass issues hundreds of short loops per token, so waking a sleeping thread for
// each would cost more than the work. Workers therefore spin briefly on an atomic generation
// counter after each loop, then block on it (a futex through std::atomic::wait). The spin is
// kept short because on a machine with more runnable threads than cores a spinning thread
// steals the time slice of the thread it waits for.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace folio {

class ThreadPool {
 public:
  // num_threads <= 0 picks the number of hardware threads.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(thread_index, begin, end) over a split of [0, n) into contiguous chunks, one per
  // thread, and returns when all are done. Chunks are multiples of `grain` (except the last).
  // Not reentrant: fn must not call parallel_for on the same pool.
  void parallel_for(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn, int64_t grain = 1);

  // The same, but the threads take chunks of `chunk` (the last may be shorter) from a shared
  // counter until none is left: for loops whose threads run at different speeds (two cores
  // sharing memory bandwidth rarely stream at the same rate), so none waits on a slower one's
  // fixed share. Which thread runs a chunk varies from call to call.
  void parallel_for_dynamic(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn, int64_t chunk);

 private:
  void worker_loop(int index);
  void run_chunk(int index);
  void start(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn, int64_t grain, bool dynamic);

  std::vector<std::thread> workers_;
  const std::function<void(int, int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_grain_ = 1;
  bool job_dynamic_ = false;
  std::atomic<int64_t> next_{0};         // dynamic loops: the first index no thread has taken
  std::atomic<uint32_t> generation_{0};  // bumped once per loop; workers wait on it
  std::atomic<int32_t> pending_{0};      // workers still running the current loop
  std::atomic<bool> stopping_{false};
};

}  // namespace folio
