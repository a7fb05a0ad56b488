#include "cli/kv_utilization_sampler.h"

#include <algorithm>

namespace folio::cli {

void KvUtilizationSampler::sample(const KvCacheMetrics& kv, int32_t requests_in_pool, int64_t reserved_tokens) {
  // An empty pool has nothing to waste; counting it as 100% would flatter the mean.
  if (kv.num_used_blocks == 0 || requests_in_pool == 0) return;
  const double held = static_cast<double>(kv.num_tokens_held);
  paged_.push_back(held / static_cast<double>(kv.num_token_slots));
  contiguous_request_.push_back(held / static_cast<double>(std::max<int64_t>(1, reserved_tokens)));
  contiguous_max_len_.push_back(held / (static_cast<double>(requests_in_pool) * max_model_len_));
  max_requests_in_pool_ = std::max(max_requests_in_pool_, requests_in_pool);
  max_used_blocks_ = std::max(max_used_blocks_, kv.num_used_blocks);
}

KvUtilizationFigures KvUtilizationSampler::figures() const {
  KvUtilizationFigures f;
  f.paged = spread_of(paged_);
  f.contiguous_request = spread_of(contiguous_request_);
  f.contiguous_max_len = spread_of(contiguous_max_len_);
  f.max_requests_in_pool = max_requests_in_pool_;
  f.max_used_blocks = max_used_blocks_;
  f.num_samples = static_cast<int32_t>(paged_.size());
  return f;
}

}  // namespace folio::cli
