#include "server/planner_pool.h"

#include <boost/asio/post.hpp>

namespace folio::server {

PlannerPool::PlannerPool(int num_threads, int max_plans, size_t max_bytes)
    : pool_(static_cast<size_t>(num_threads < 1 ? 1 : num_threads)),
      max_plans_(max_plans < 1 ? 1 : max_plans),
      max_bytes_(max_bytes) {}

PlannerPool::~PlannerPool() {
  pool_.join();
}

bool PlannerPool::try_post(std::function<void()> work, size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (plans_ >= max_plans_ || (plans_ > 0 && bytes_ + bytes > max_bytes_)) return false;
    ++plans_;
    bytes_ += bytes;
  }
  boost::asio::post(pool_, [this, bytes, work = std::move(work)] {
    work();
    std::lock_guard<std::mutex> lock(mutex_);
    --plans_;
    bytes_ -= bytes;
  });
  return true;
}

int PlannerPool::in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return plans_;
}

size_t PlannerPool::bytes_in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

}  // namespace folio::server
