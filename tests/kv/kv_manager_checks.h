// Helpers shared by the KvCacheManager tests: the invariant check as a gtest expectation, and
// distinct token ids for prompts.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace folio::testing {

inline void expect_ok(const KvCacheManager& manager) {
  const Status status = manager.check_invariants();
  EXPECT_TRUE(status.is_ok()) << status.message();
}

inline std::vector<int32_t> iota_tokens(int32_t count, int32_t first = 100) {
  std::vector<int32_t> tokens(count);
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

}  // namespace folio::testing
