// A few threads for the CPU work of answering a request (parsing its JSON, tokenizing its
// prompt, rendering a chat template), so that the io threads only move bytes: a large prompt
// never delays /health or another client's stream. Bounded: past `capacity` plans queued or
// running, try_post refuses and the connection answers 503.
#pragma once

#include <atomic>
#include <boost/asio/thread_pool.hpp>
#include <functional>

namespace folio::server {

class PlannerPool {
 public:
  PlannerPool(int num_threads, int capacity);
  ~PlannerPool();
  PlannerPool(const PlannerPool&) = delete;
  PlannerPool& operator=(const PlannerPool&) = delete;

  // Runs work on a pool thread; false (and work dropped) when capacity plans are in flight.
  bool try_post(std::function<void()> work);
  int in_flight() const { return in_flight_.load(); }

 private:
  boost::asio::thread_pool pool_;
  std::atomic<int> in_flight_{0};
  const int capacity_;
};

}  // namespace folio::server
