// One GPU rank's place in tensor parallelism (model/tensor_parallel_plan.h): its weights are a
// shard; the partial sums of its row-parallel products (attention output, down) and of the
// vocabulary-parallel embedding are completed through the collectives, and the vocabulary slices
// of the logits are gathered into whole rows on every rank, which then samples them alike.
// Owned by the tensor-parallel executor (cuda_tensor_parallel_executor.h); the rank's
// CudaExecutor, CudaModel and CudaForward point to it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/cuda/device_collectives.h"
#include "model/model_config.h"
#include "model/tensor_parallel_plan.h"

namespace folio::cuda {

struct DeviceRank {
  DeviceCollectives* collectives = nullptr;
  int32_t rank = 0;
  std::vector<RankShard> shards;  // every rank's, in rank order
  ModelConfig full_config;        // the whole model, as the engine sees it

  const RankShard& shard() const { return shards[static_cast<size_t>(rank)]; }
  // The widest vocabulary slice: each rank sends this many logits a row to the all-gather.
  int64_t max_vocab_slice() const {
    int64_t widest = 0;
    for (const RankShard& s : shards) widest = std::max(widest, s.vocab_count);
    return widest;
  }
};

}  // namespace folio::cuda
