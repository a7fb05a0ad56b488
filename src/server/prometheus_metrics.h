// GET /metrics: the worker's metrics in Prometheus' text format (version 0.0.4), named as
// vLLM names them (folio: instead of vllm:) so that existing dashboards map onto them.
#pragma once

#include <string>

#include "server/engine_worker.h"

namespace folio::server {

std::string prometheus_metrics_text(const WorkerMetrics& metrics, const std::string& model_name);

}  // namespace folio::server
