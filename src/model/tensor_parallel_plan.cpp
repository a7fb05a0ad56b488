#include "model/tensor_parallel_plan.h"

#include <algorithm>
#include <string>

namespace folio {
namespace {

// Part i of `total` units split over `parts`: the first total % parts parts one unit larger.
struct Part {
  int64_t begin = 0;
  int64_t count = 0;
};
Part split_even(int64_t total, int64_t parts, int64_t i) {
  const int64_t base = total / parts, extra = total % parts;
  return {i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

}  // namespace

Expected<std::vector<RankShard>> plan_tensor_parallel(const ModelConfig& config, int32_t num_ranks, int64_t ffn_unit) {
  const int32_t heads = config.num_heads, kv_heads = config.num_kv_heads;
  if (num_ranks < 1) return Status::error("--tensor-parallel-size must be at least 1");
  if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0) {
    return Status::error("tensor parallel: " + std::to_string(heads) + " query heads do not group over " +
                         std::to_string(kv_heads) + " KV heads");
  }
  const int32_t group = heads / kv_heads;
  // Ranks > KV heads: each KV head's group is shared by up to ceil(ranks / KV heads) ranks.
  if (num_ranks > kv_heads && (num_ranks + kv_heads - 1) / kv_heads > group) {
    return Status::error("tensor parallel: " + std::to_string(num_ranks) + " ranks cannot share " +
                         std::to_string(heads) + " query heads in groups of " + std::to_string(group) + " over " +
                         std::to_string(kv_heads) + " KV heads (a rank would get no query head)");
  }
  if (ffn_unit < 1 || config.ffn_dim % ffn_unit != 0) ffn_unit = 1;
  const int64_t ffn_units = config.ffn_dim / ffn_unit;
  if (ffn_units < num_ranks) {
    return Status::error("tensor parallel: an FFN of " + std::to_string(config.ffn_dim) + " does not split over " +
                         std::to_string(num_ranks) + " ranks");
  }
  // The vocabulary in rows of 64 (whole AMX panels on the CPU), the last part short.
  constexpr int64_t kVocabUnit = 64;
  const int64_t vocab_units = (config.vocab_size + kVocabUnit - 1) / kVocabUnit;
  if (vocab_units < num_ranks) return Status::error("tensor parallel: the vocabulary is too small to split");

  std::vector<RankShard> shards(static_cast<size_t>(num_ranks));
  for (int32_t r = 0; r < num_ranks; ++r) {
    RankShard& s = shards[static_cast<size_t>(r)];
    s.rank = r;
    s.num_ranks = num_ranks;
    if (num_ranks <= kv_heads) {
      const Part kv = split_even(kv_heads, num_ranks, r);
      s.kv_head_begin = static_cast<int32_t>(kv.begin);
      s.num_kv_heads = static_cast<int32_t>(kv.count);
      s.head_begin = s.kv_head_begin * group;
      s.num_heads = s.num_kv_heads * group;
    } else {
      // Ranks in runs per KV head; this rank's place in its head's run picks its query heads.
      int32_t first = 0, kv = 0;
      for (;; ++kv) {
        const auto run = static_cast<int32_t>(split_even(num_ranks, kv_heads, kv).count);
        if (r < first + run) {
          const Part q = split_even(group, run, r - first);
          s.head_begin = kv * group + static_cast<int32_t>(q.begin);
          s.num_heads = static_cast<int32_t>(q.count);
          break;
        }
        first += run;
      }
      s.kv_head_begin = kv;
      s.num_kv_heads = 1;
    }
    const Part ffn = split_even(ffn_units, num_ranks, r);
    s.ffn_begin = ffn.begin * ffn_unit;
    s.ffn_count = ffn.count * ffn_unit;
    const Part vocab = split_even(vocab_units, num_ranks, r);
    s.vocab_begin = vocab.begin * kVocabUnit;
    s.vocab_count = std::min<int64_t>(config.vocab_size, (vocab.begin + vocab.count) * kVocabUnit) - s.vocab_begin;
  }
  return shards;
}

ModelConfig rank_config(const ModelConfig& config, const RankShard& shard) {
  ModelConfig c = config;
  c.num_heads = shard.num_heads;
  c.num_kv_heads = shard.num_kv_heads;
  c.ffn_dim = static_cast<int32_t>(shard.ffn_count);
  c.vocab_size = static_cast<int32_t>(shard.vocab_count);
  return c;
}

}  // namespace folio
