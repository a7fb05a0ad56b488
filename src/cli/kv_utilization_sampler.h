// KV utilization over a run, sampled after every engine step: the paged pool's (tokens held /
// token slots in used blocks), against what a contiguous allocator would have reserved for
// the same requests at that moment: prompt + max_tokens each (servers that know the request's
// limit), or max_model_len each (servers that reserve the whole context, as HF-style static
// caches and early FasterTransformer/Orca did).
#pragma once

#include <cstdint>
#include <vector>

#include "cli/request_timing.h"
#include "kv/kv_cache_manager.h"

namespace folio::cli {

struct KvUtilizationFigures {
  Spread paged;               // per step, over steps with any block in use
  Spread contiguous_request;  // tokens held / sum(prompt + max_tokens) of requests in the pool
  Spread contiguous_max_len;  // tokens held / (requests in the pool * max_model_len)
  int32_t max_requests_in_pool = 0;
  int32_t max_used_blocks = 0;
  int32_t num_samples = 0;
};

class KvUtilizationSampler {
 public:
  explicit KvUtilizationSampler(int32_t max_model_len) : max_model_len_(max_model_len) {}

  // requests_in_pool: requests holding KV now; reserved_tokens: their prompt + max_tokens sum.
  void sample(const KvCacheMetrics& kv, int32_t requests_in_pool, int64_t reserved_tokens);
  KvUtilizationFigures figures() const;

 private:
  int32_t max_model_len_;
  std::vector<double> paged_, contiguous_request_, contiguous_max_len_;
  int32_t max_requests_in_pool_ = 0;
  int32_t max_used_blocks_ = 0;
};

}  // namespace folio::cli
