#include "core/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define FOLIO_CPU_RELAX() _mm_pause()
#else
#define FOLIO_CPU_RELAX() std::this_thread::yield()
#endif

namespace folio {
namespace {
// A few tens of microseconds of spinning before blocking.
constexpr int kSpinIterations = 2048;
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run_chunk(int index) {
  if (job_dynamic_) {
    for (;;) {
      const int64_t begin = next_.fetch_add(job_grain_, std::memory_order_relaxed);
      if (begin >= job_n_) return;
      (*job_)(index, begin, std::min(job_n_, begin + job_grain_));
    }
  }
  const int64_t threads = num_threads();
  const int64_t blocks = (job_n_ + job_grain_ - 1) / job_grain_;
  const int64_t begin_block = blocks * index / threads;
  const int64_t end_block = blocks * (index + 1) / threads;
  const int64_t begin = std::min(job_n_, begin_block * job_grain_);
  const int64_t end = std::min(job_n_, end_block * job_grain_);
  if (begin < end) (*job_)(index, begin, end);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn, int64_t grain) {
  start(n, fn, grain, false);
}

void ThreadPool::parallel_for_dynamic(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn, int64_t chunk) {
  start(n, fn, chunk, true);
}

void ThreadPool::start(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn, int64_t grain, bool dynamic) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (workers_.empty() || n <= grain) {
    fn(0, 0, n);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  job_grain_ = grain;
  job_dynamic_ = dynamic;
  next_.store(0, std::memory_order_relaxed);
  pending_.store(static_cast<int32_t>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);  // publishes the job fields above
  generation_.notify_all();
  run_chunk(0);
  for (int spins = 0;; ++spins) {
    const int32_t left = pending_.load(std::memory_order_acquire);
    if (left == 0) break;
    if (spins < kSpinIterations) {
      FOLIO_CPU_RELAX();
    } else {
      pending_.wait(left, std::memory_order_acquire);
    }
  }
  job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  uint32_t seen = 0;
  for (;;) {
    for (int spins = 0; generation_.load(std::memory_order_acquire) == seen; ++spins) {
      if (spins < kSpinIterations) {
        FOLIO_CPU_RELAX();
      } else {
        generation_.wait(seen, std::memory_order_acquire);
      }
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_.load()) return;
    run_chunk(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

}  // namespace folio
