// A few threads for the CPU work of answering a request (parsing its JSON, tokenizing its
// prompt, rendering a chat template), so that the io threads only move bytes: a large prompt
// never delays /health or another client's stream. Bounded by what waits, not by a count
// alone: past `max_plans` plans or `max_bytes` of their request bodies queued or running,
// try_post refuses and the connection answers 503. A burst of hundreds of small requests
// (a benchmark's 768 at once) is queued; a flood of 8 MB bodies is refused early.
#pragma once

#include <boost/asio/thread_pool.hpp>
#include <cstddef>
#include <functional>
#include <mutex>

namespace folio::server {

class PlannerPool {
 public:
  PlannerPool(int num_threads, int max_plans, size_t max_bytes);
  ~PlannerPool();
  PlannerPool(const PlannerPool&) = delete;
  PlannerPool& operator=(const PlannerPool&) = delete;

  // Runs work on a pool thread; false (and work dropped) when max_plans plans are in flight or
  // `bytes` more would pass max_bytes. A plan alone is always admitted, whatever its size (the
  // body limit has bounded it already).
  bool try_post(std::function<void()> work, size_t bytes);
  int in_flight() const;
  size_t bytes_in_flight() const;

 private:
  boost::asio::thread_pool pool_;
  mutable std::mutex mutex_;
  int plans_ = 0;
  size_t bytes_ = 0;
  const int max_plans_;
  const size_t max_bytes_;
};

}  // namespace folio::server
