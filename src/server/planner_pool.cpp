#include "server/planner_pool.h"

#include <boost/asio/post.hpp>

namespace folio::server {

PlannerPool::PlannerPool(int num_threads, int capacity)
    : pool_(static_cast<size_t>(num_threads < 1 ? 1 : num_threads)), capacity_(capacity < 1 ? 1 : capacity) {}

PlannerPool::~PlannerPool() {
  pool_.join();
}

bool PlannerPool::try_post(std::function<void()> work) {
  if (in_flight_.fetch_add(1) >= capacity_) {
    in_flight_.fetch_sub(1);
    return false;
  }
  boost::asio::post(pool_, [this, work = std::move(work)] {
    work();
    in_flight_.fetch_sub(1);
  });
  return true;
}

}  // namespace folio::server
