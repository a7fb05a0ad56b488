// How a model splits over N tensor-parallel ranks, Megatron-style: Q|K|V and gate|up by output
// rows (column-parallel), the attention output and down projections by input columns
// (row-parallel, each rank's product a partial sum that an all-reduce completes), the
// embedding and the LM head by vocabulary rows. The same plan serves every device: the CPU runs
// it as in-process ranks (backend/cpu/tensor_parallel_executor.h), a multi-GPU executor as one
// rank per GPU.
//
// Heads split by KV head so that each rank's query heads share its KV heads the way the whole
// model's do (local query head h reads local KV head h / (local heads / local KV heads)):
//  - ranks <= KV heads: each rank takes a contiguous run of KV heads (runs differ by at most
//    one head) and every query head of their groups;
//  - ranks > KV heads: each rank holds one KV head (replicated on the ranks that share it) and
//    a contiguous part of that head's query group.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "model/model_config.h"

namespace folio {

struct RankShard {
  int32_t rank = 0;
  int32_t num_ranks = 1;
  int32_t head_begin = 0;  // query heads [head_begin, head_begin + num_heads)
  int32_t num_heads = 0;
  int32_t kv_head_begin = 0;  // KV heads this rank holds
  int32_t num_kv_heads = 0;
  int64_t ffn_begin = 0;  // rows of gate and up, columns of down
  int64_t ffn_count = 0;
  int64_t vocab_begin = 0;  // rows of the embedding table and of the LM head
  int64_t vocab_count = 0;
};

// One shard per rank. ffn_unit: the FFN splits in multiples of it where the FFN width allows
// (a quantized down projection's block, so that its column slices stay in its type).
Expected<std::vector<RankShard>> plan_tensor_parallel(const ModelConfig& config, int32_t num_ranks,
                                                      int64_t ffn_unit = 1);

// The model as one rank sees it: its heads, its FFN width and its vocabulary slice.
ModelConfig rank_config(const ModelConfig& config, const RankShard& shard);

}  // namespace folio
