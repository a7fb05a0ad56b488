// The planner pool's admission: refused past its plan count or its bytes of bodies in flight,
// a lone plan always admitted, and room given back when plans finish.
#include "server/planner_pool.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

namespace folio::server {
namespace {

// Blocks the pool's only thread until released, so posted plans stay in flight.
struct Gate {
  std::promise<void> open;
  std::shared_future<void> opened = open.get_future().share();
  std::function<void()> wait() {
    return [f = opened] { f.wait(); };
  }
};

void wait_until_idle(const PlannerPool& pool) {
  for (int i = 0; i < 2000 && pool.in_flight() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST(PlannerPool, RefusesPastItsPlanCount) {
  PlannerPool pool(1, 3, size_t{1} << 30);
  Gate gate;
  EXPECT_TRUE(pool.try_post(gate.wait(), 10));
  EXPECT_TRUE(pool.try_post(gate.wait(), 10));
  EXPECT_TRUE(pool.try_post(gate.wait(), 10));
  EXPECT_FALSE(pool.try_post(gate.wait(), 10));
  EXPECT_EQ(pool.in_flight(), 3);
  gate.open.set_value();
  wait_until_idle(pool);
  EXPECT_EQ(pool.in_flight(), 0);
  EXPECT_EQ(pool.bytes_in_flight(), 0u);
  EXPECT_TRUE(pool.try_post([] {}, 10));
}

TEST(PlannerPool, RefusesPastItsBytesButAdmitsALonePlanOfAnySize) {
  PlannerPool pool(1, 1000, 100);
  Gate gate;
  EXPECT_TRUE(pool.try_post(gate.wait(), 500));  // alone: admitted although past the budget
  EXPECT_FALSE(pool.try_post(gate.wait(), 1));   // anything more is past it
  gate.open.set_value();
  wait_until_idle(pool);
  Gate second;
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(pool.try_post(second.wait(), 10)) << i;  // 100 bytes: the budget
  EXPECT_FALSE(pool.try_post(second.wait(), 1));
  EXPECT_EQ(pool.bytes_in_flight(), 100u);
  second.open.set_value();
  wait_until_idle(pool);
  EXPECT_EQ(pool.bytes_in_flight(), 0u);
}

}  // namespace
}  // namespace folio::server
