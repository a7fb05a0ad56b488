#include "backend/cpu/tensor_parallel_executor.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <string>
#include <thread>

namespace folio::cpu {

TensorParallelExecutor::TensorParallelExecutor(const ModelWeights& weights, int32_t num_ranks)
    : weights_(weights), all_reduce_(num_ranks), rank_threads_(num_ranks) {}

Expected<std::unique_ptr<TensorParallelExecutor>> TensorParallelExecutor::create(const ModelWeights& weights,
                                                                                 int32_t num_ranks, int num_threads,
                                                                                 const KvCacheOptions& kv, Isa isa,
                                                                                 ActivationPrecision precision) {
  // FFN slices in multiples of 32 at least: gate and up in whole panels.
  const int64_t ffn_unit = weights.tensor_parallel_ffn_unit(32);
  Expected<std::vector<RankShard>> plan = plan_tensor_parallel(weights.config(), num_ranks, ffn_unit);
  if (!plan) return plan.status();
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads_per_rank = std::max(1, num_threads / num_ranks);

  // One pool layout for every rank, as many blocks as the budget buys the whole model (KV heads
  // replicated over ranks cost their copies on top: the same budget holds the same tokens).
  const ModelConfig& c = weights.config();
  const int32_t staging = kv_staging_blocks(kv, c);
  const int64_t bytes_per_block = kv_bytes_per_block(c, kv.block_size, kv.format, kv.release_window_blocks);
  const int64_t staging_bytes =
      static_cast<int64_t>(staging) *
      static_cast<int64_t>(
          kv_cache_shape(c, 1, kv.block_size, kv.format, 0, kv.release_window_blocks).bytes_per_staging_block());
  const int32_t blocks = std::max(1, kv_blocks_for_budget(kv.kv_cache_bytes - staging_bytes, bytes_per_block));
  const int32_t host_blocks = kv_blocks_for_budget(kv.swap_space_bytes - staging_bytes, bytes_per_block);

  std::unique_ptr<TensorParallelExecutor> tp(new TensorParallelExecutor(weights, num_ranks));
  tp->ranks_.resize(static_cast<size_t>(num_ranks));
  for (int32_t r = 0; r < num_ranks; ++r) {
    Rank& rank = tp->ranks_[static_cast<size_t>(r)];
    rank.shard = (*plan)[static_cast<size_t>(r)];
    Expected<std::unique_ptr<ModelWeights>> shard = weights.shard(rank.shard);
    if (!shard) return shard.status();
    rank.weights = std::move(shard).value();
    rank.backend = std::make_unique<CpuBackend>(threads_per_rank, isa, precision);
    rank.executor = std::make_unique<CpuExecutor>(*rank.weights, *rank.backend, blocks, kv.block_size, host_blocks,
                                                  kv.format, staging, kv.release_window_blocks, kv.staging_overlay);
    rank.executor->set_tensor_parallel({&tp->all_reduce_, r, rank.shard.vocab_begin});
  }
  return tp;
}

KvPoolLayout TensorParallelExecutor::kv_pool() const {
  KvPoolLayout layout = ranks_[0].executor->kv_pool();
  // Every rank holds its heads' share of each block and staging block: the pool's bytes are the
  // sums (the overlay's ratio of the two, kv/block_pool.h, is every rank's).
  layout.bytes_per_block = 0;
  layout.bytes_per_staging_block = 0;
  for (const Rank& rank : ranks_) {
    layout.bytes_per_block += rank.executor->kv_pool().bytes_per_block;
    layout.bytes_per_staging_block += rank.executor->kv_pool().bytes_per_staging_block;
  }
  return layout;
}

Capabilities TensorParallelExecutor::capabilities() const {
  Capabilities caps = ranks_[0].executor->capabilities();
  caps.device = "cpu (" + std::string(isa_name(ranks_[0].backend->isa())) +
                ", tensor parallel: " + std::to_string(ranks_.size()) + " ranks x " +
                std::to_string(ranks_[0].backend->num_threads()) + " threads)";
  return caps;
}

StepResult TensorParallelExecutor::execute(const ForwardBatch& batch, const SamplingPlan* plan) {
  assert(plan == nullptr && "the CPU executor returns logits; the engine samples them");
  (void)plan;
  // Every rank on its own thread at once: the all-reduces wait for all of them.
  rank_threads_.parallel_for(num_ranks(), [&](int, int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      Rank& rank = ranks_[static_cast<size_t>(r)];
      rank.result = rank.executor->execute(batch, nullptr);
    }
  });
  if (batch.tokens.empty() || batch.logit_rows.empty()) return {};
  // The vocabulary slices side by side in each row.
  const size_t vocab = static_cast<size_t>(weights_.config().vocab_size), rows = batch.logit_rows.size();
  logits_.resize(rows * vocab);
  for (const Rank& rank : ranks_) {
    const auto begin = static_cast<size_t>(rank.shard.vocab_begin), count = static_cast<size_t>(rank.shard.vocab_count);
    for (size_t row = 0; row < rows; ++row) {
      std::memcpy(logits_.data() + row * vocab + begin, rank.result.logits.data() + row * count, count * sizeof(float));
    }
  }
  return StepResult{logits_, {}};
}

}  // namespace folio::cpu
