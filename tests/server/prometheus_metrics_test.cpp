#include "server/prometheus_metrics.h"

#include <gtest/gtest.h>

#include <string>

namespace folio::server {
namespace {

// The staging overlay's two series: the gauge of sealed blocks in staging memory now, and the
// counter of all handed out, which still tells after a run (the gauge is back to 0) whether the
// pool used the overlay at all.
TEST(PrometheusMetrics, ReportsTheStagingOverlayNowAndInTotal) {
  WorkerMetrics metrics;
  metrics.engine.kv.num_used_overlay_blocks = 3;
  metrics.engine.kv.num_overlay_allocations = 1234;
  const std::string text = prometheus_metrics_text(metrics, "m");
  EXPECT_NE(text.find("# TYPE folio:kv_cache_overlay_blocks_in_use gauge\n"
                      "folio:kv_cache_overlay_blocks_in_use{model_name=\"m\"} 3\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE folio:kv_cache_overlay_allocations_total counter\n"
                      "folio:kv_cache_overlay_allocations_total{model_name=\"m\"} 1234\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace folio::server
