#include "backend/cuda/cuda_tensor_parallel_executor.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <limits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/nccl_collectives.h"
#include "backend/cuda/same_device_collectives.h"
#include "executor/kv_pool_sizing.h"
#include "model/tensor_parallel_plan.h"

namespace folio::cuda {

CudaTensorParallelExecutor::CudaTensorParallelExecutor(const ModelConfig& config, int32_t num_ranks)
    : config_(config), ranks_(static_cast<size_t>(num_ranks)), rank_threads_(num_ranks) {}

CudaTensorParallelExecutor::~CudaTensorParallelExecutor() {
  for (Rank& rank : ranks_) {
    if (rank.executor == nullptr) continue;
    cudaSetDevice(rank.device);
    rank.executor.reset();
  }
}

Expected<std::unique_ptr<CudaTensorParallelExecutor>> CudaTensorParallelExecutor::create(
    const ModelWeights& weights, const std::vector<int32_t>& devices, const CudaExecutorOptions& options) {
  const auto num_ranks = static_cast<int32_t>(devices.size());
  if (num_ranks < 1) return Status::error("tensor parallel: no devices");
  const bool one_device = std::all_of(devices.begin(), devices.end(), [&](int32_t d) { return d == devices[0]; });
  std::vector<int32_t> sorted = devices;
  std::sort(sorted.begin(), sorted.end());
  const bool distinct = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
  if (!one_device && !distinct) {
    return Status::error("tensor parallel: give each rank its own GPU, or every rank the same one (checks)");
  }
  int device_count = 0;
  if (Status s = cuda_status(cudaGetDeviceCount(&device_count), "counting GPUs"); !s) return s;
  for (int32_t d : devices) {
    if (d < 0 || d >= device_count) {
      return Status::error("tensor parallel: GPU " + std::to_string(d) + " does not exist (this machine has " +
                           std::to_string(device_count) + ")");
    }
  }
  const ModelConfig& c = weights.config();
  // FFN slices in multiples of 64 at least: the INT4 layout packs 64 columns a word group.
  const int64_t ffn_unit = weights.tensor_parallel_ffn_unit(64);
  Expected<std::vector<RankShard>> plan = plan_tensor_parallel(c, num_ranks, ffn_unit);
  if (!plan) return plan.status();

  std::unique_ptr<CudaTensorParallelExecutor> tp(new CudaTensorParallelExecutor(c, num_ranks));
  if (one_device && num_ranks > 1) {
    if (Status s = cuda_status(cudaSetDevice(devices[0]), "selecting the device"); !s) return s;
    // The longest all-reduce: a step's tokens (a graph bucket at most, graphs being off here).
    const int64_t tokens = std::max<int64_t>({options.max_num_batched_tokens, options.max_num_seqs, 1024});
    Expected<std::unique_ptr<SameDeviceCollectives>> same =
        SameDeviceCollectives::create(num_ranks, static_cast<size_t>(tokens * c.hidden_dim));
    if (!same) return same.status();
    tp->collectives_ = std::move(same).value();
    tp->collectives_name_ = "one GPU";
  } else {
    Expected<std::unique_ptr<NcclCollectives>> nccl = NcclCollectives::create(devices);
    if (!nccl) return nccl.status();
    tp->collectives_ = std::move(nccl).value();
    tp->collectives_name_ = "NCCL " + NcclCollectives::version();
  }

  // Budgets given in bytes are the whole model's: each rank takes its KV heads' part, so every
  // rank's pool buys about the same blocks (the smallest is taken below).
  const int64_t full_block =
      kv_bytes_per_block(c, options.block_size, options.kv_format, options.release_window_blocks);
  int32_t ranks_on_device = 1;
  if (one_device) ranks_on_device = num_ranks;
  for (int32_t r = 0; r < num_ranks; ++r) {
    Rank& rank = tp->ranks_[static_cast<size_t>(r)];
    rank.device = devices[static_cast<size_t>(r)];
    rank.place = DeviceRank{tp->collectives_.get(), r, *plan, c};
    Expected<std::unique_ptr<ModelWeights>> shard = weights.shard(rank.place.shard());
    if (!shard) return shard.status();
    CudaExecutorOptions o = options;
    o.device = rank.device;
    o.tensor_parallel = &rank.place;
    o.defer_kv = true;
    o.quiet = options.quiet || r > 0;
    const double part = static_cast<double>(kv_bytes_per_block((*shard)->config(), options.block_size,
                                                               options.kv_format, options.release_window_blocks)) /
                        static_cast<double>(full_block);
    if (options.kv_cache_bytes > 0) o.kv_cache_bytes = static_cast<int64_t>(options.kv_cache_bytes * part);
    o.swap_space_bytes = static_cast<int64_t>(options.swap_space_bytes * part);
    if (!options.quiet) {
      std::fprintf(stderr, "cuda: tensor parallel rank %d of %d on GPU %d (%s): %d heads, %d KV heads, FFN %lld\n", r,
                   num_ranks, rank.device, tp->collectives_name_.c_str(), rank.place.shard().num_heads,
                   rank.place.shard().num_kv_heads, static_cast<long long>(rank.place.shard().ffn_count));
    }
    Expected<std::unique_ptr<CudaExecutor>> executor = CudaExecutor::create(**shard, o);
    if (!executor) return executor.status();
    rank.executor = std::move(executor).value();
  }
  // Every rank's weights are in memory now: each plans with its share of what is left.
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  CudaKvPlan pool{kMax, kMax, kMax};
  for (Rank& rank : tp->ranks_) {
    if (Status s = cuda_status(cudaSetDevice(rank.device), "selecting the device"); !s) return s;
    Expected<CudaKvPlan> mine = rank.executor->plan_kv(1.0 / ranks_on_device);
    if (!mine) return mine.status();
    pool.blocks = std::min(pool.blocks, mine->blocks);
    pool.staging = std::min(pool.staging, mine->staging);
    pool.host_blocks = std::min(pool.host_blocks, mine->host_blocks);
  }
  for (Rank& rank : tp->ranks_) {
    if (Status s = cuda_status(cudaSetDevice(rank.device), "selecting the device"); !s) return s;
    if (Status s = rank.executor->allocate_kv(pool); !s) return s;
  }
  return tp;
}

KvPoolLayout CudaTensorParallelExecutor::kv_pool() const {
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

Capabilities CudaTensorParallelExecutor::capabilities() const {
  Capabilities caps = ranks_[0].executor->capabilities();
  caps.device += ", tensor parallel: " + std::to_string(ranks_.size()) + " ranks (" + collectives_name_ + ")";
  return caps;
}

StepResult CudaTensorParallelExecutor::execute(const ForwardBatch& batch, const SamplingPlan* plan) {
  // Every rank at once, each on its own thread: the collectives wait for all of them.
  rank_threads_.parallel_for(num_ranks(), [&](int, int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      Rank& rank = ranks_[static_cast<size_t>(r)];
      FOLIO_CUDA_CHECK(cudaSetDevice(rank.device));
      rank.result = rank.executor->execute(batch, plan);
    }
  });
  return ranks_[0].result;
}

}  // namespace folio::cuda
