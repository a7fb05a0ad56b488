// A fixed set of worker threads for data-parallel loops. The calling thread takes part in
// every loop, so a pool of N threads uses N-1 workers plus the caller.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
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
  void parallel_for(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn,
                    int64_t grain = 1);

 private:
  void worker_loop(int index);
  void run_chunk(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(int, int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_grain_ = 1;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
};

}  // namespace folio
