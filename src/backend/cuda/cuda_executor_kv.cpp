// CudaExecutor's KV pool: sizing it (plan_kv), allocating it and its staging and swap pools
// (allocate_kv), block copies between them (copy_blocks), and reading a block back for checks.
#include <cuda_runtime.h>

#include <algorithm>
#include <cassert>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_executor.h"
#include "backend/cuda/cuda_model.h"
#include "executor/kv_pool_sizing.h"

namespace folio::cuda {
namespace {

size_t align256(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// Kept free beyond the utilization budget for cuBLASLt, graphs and the CUDA context's growth.
constexpr size_t kReserveBytes = size_t{512} << 20;

}  // namespace

int64_t CudaExecutor::kv_bytes_per_block() const {
  return folio::kv_bytes_per_block(model_->config(), options_.block_size, options_.kv_format,
                                   options_.release_window_blocks);
}

Expected<CudaKvPlan> CudaExecutor::plan_kv(double memory_share) const {
  const ModelConfig& c = model_->config();
  const int64_t bytes_per_block = kv_bytes_per_block();
  const int64_t staging_bytes =
      2 * static_cast<int64_t>(c.num_layers) *
      static_cast<int64_t>(kv_block_bytes(KvFormat::kFp16, options_.block_size, c.num_kv_heads, c.head_dim));
  int64_t budget = options_.kv_cache_bytes;
  if (budget <= 0) {
    size_t free_bytes = 0, total = 0;
    if (Status s = cuda_status(cudaMemGetInfo(&free_bytes, &total), "memory info"); !s) return s;
    budget = static_cast<int64_t>(memory_share *
                                  (static_cast<double>(total_memory_) * options_.gpu_memory_utilization -
                                   static_cast<double>(total - free_bytes) - static_cast<double>(kReserveBytes)));
  }
  CudaKvPlan plan;
  // Residual formats: the staging blocks come out of the budget first (kv_pool_sizing.h).
  if (kv_format_has_residual(options_.kv_format)) {
    const int32_t wanted =
        options_.num_staging_blocks > 0
            ? options_.num_staging_blocks
            : static_cast<int32_t>(std::min<int64_t>(
                  kv_staging_blocks_for(options_.max_num_seqs, options_.max_num_batched_tokens, options_.block_size),
                  kv_staging_budget(budget, options_.staging_overlay) / staging_bytes));
    plan.staging = std::max(3, wanted);
    budget -= plan.staging * staging_bytes;
  }
  if (budget < 2 * bytes_per_block) {
    return Status::error(
        "cuda: no memory left for the KV cache after weights and activations (raise "
        "--gpu-memory-utilization or lower --max-num-batched-tokens)");
  }
  // A budget the caller gave buys the null block too; the utilization budget leaves it out.
  plan.blocks = std::max(2, kv_blocks_for_budget(budget, bytes_per_block) - (options_.kv_cache_bytes > 0 ? 0 : 1));
  // The swap budget buys host staging blocks first, as many as the device has.
  plan.host_blocks = kv_blocks_for_budget(options_.swap_space_bytes - plan.staging * staging_bytes, bytes_per_block);
  return plan;
}

Status CudaExecutor::allocate_kv(const CudaKvPlan& plan) {
  if (kv_pool_.get() != nullptr) return Status::error("cuda: the KV pool is allocated already");
  const ModelConfig& c = model_->config();
  block_bytes_ = kv_block_bytes(options_.kv_format, options_.block_size, c.num_kv_heads, c.head_dim);
  const int64_t bytes_per_block = kv_bytes_per_block();
  const size_t num_slots = static_cast<size_t>(groups_.num_slots);
  staging_block_bytes_ = kv_block_bytes(KvFormat::kFp16, options_.block_size, c.num_kv_heads, c.head_dim);
  const int64_t staging_bytes = 2 * static_cast<int64_t>(c.num_layers) * static_cast<int64_t>(staging_block_bytes_);
  num_staging_ = plan.staging;
  num_blocks_ = plan.blocks;
  // A layer half is [blocks][staging blocks]: block ids past num_blocks_ land in the staging
  // blocks' bytes (the overlay; kv/block_pool.h keeps the two from colliding). Kernels read
  // 16-byte pieces of both, so the staging region must start 16-byte aligned.
  staging_offset_ = block_bytes_ * static_cast<size_t>(num_blocks_);
  assert(num_staging_ == 0 || staging_offset_ % 16 == 0);
  layer_bytes_ = align256(staging_offset_ + staging_block_bytes_ * static_cast<size_t>(num_staging_));
  num_overlay_blocks_ =
      options_.staging_overlay && num_staging_ > 0
          ? static_cast<int32_t>(staging_block_bytes_ * static_cast<size_t>(num_staging_) / block_bytes_)
          : 0;
  const size_t pool = 2 * num_slots * layer_bytes_;
  if (Status s = kv_pool_.allocate(pool, "allocating the KV pool"); !s) return s;
  // Zeros: the null block 0 is what padded decode rows read.
  if (Status s = cuda_status(cudaMemset(kv_pool_.get(), 0, pool), "clearing the KV pool"); !s) return s;
  stats_.kv_pool_bytes = static_cast<int64_t>(pool);
  auto* base = kv_pool_.get<uint8_t>();
  // Residual formats keep one group (create() allows them for models without windows only), so
  // a layer's slot is the layer and the staging blocks stay per layer.
  assert(num_staging_ == 0 || groups_.num_groups() == 1);
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const size_t slot = static_cast<size_t>(groups_.layer_slot[static_cast<size_t>(l)]);
    KvLayerView view{base + (2 * slot) * layer_bytes_,
                     base + (2 * slot + 1) * layer_bytes_,
                     num_blocks_ + num_overlay_blocks_,
                     options_.block_size,
                     c.num_kv_heads,
                     c.head_dim,
                     options_.kv_format};
    if (num_staging_ > 0) {
      view.staging_k = reinterpret_cast<uint16_t*>(view.k + staging_offset_);
      view.staging_v = reinterpret_cast<uint16_t*>(view.v + staging_offset_);
      view.num_staging = num_staging_;
    }
    kv_layers_.push_back(view);
  }
  num_host_blocks_ = plan.host_blocks;
  if (num_host_blocks_ > 1) {
    if (Status s = host_pool_.allocate(static_cast<size_t>(num_host_blocks_) * bytes_per_block, "pinned swap pool");
        !s) {
      return s;
    }
    num_host_staging_ = num_staging_;
    if (num_host_staging_ > 0) {
      if (Status s = host_staging_.allocate(static_cast<size_t>(num_host_staging_) * staging_bytes,
                                            "pinned swap staging blocks");
          !s) {
        return s;
      }
    }
  } else {
    num_host_blocks_ = 0;
  }
  print_summary();
  return Status::ok();
}

void CudaExecutor::copy_blocks(std::span<const BlockCopy> copies) {
  // A block is 2 * num_slots pieces, one per layer slot and K/V half, a slot apart on the device
  // and back to back in a host block: one strided 2-D copy each. (Staging blocks exist with one
  // group only, where slots are layers.)
  const size_t pieces = 2 * static_cast<size_t>(groups_.num_slots);
  auto* device = kv_pool_.get<uint8_t>();
  auto* host = host_pool_.get<uint8_t>();
  const size_t host_block = pieces * block_bytes_;
  auto* staging = device + staging_offset_;
  auto* host_staging = host_staging_.get<uint8_t>();
  const size_t sb = staging_block_bytes_;
  const size_t host_staging_block = pieces * sb;
  for (const BlockCopy& copy : copies) {
    // An unsealed block's tokens are in its staging block: it travels with the block.
    if (copy.src_staging >= 0 && copy.dst_staging >= 0) {
      const size_t src = static_cast<size_t>(copy.src_staging), dst = static_cast<size_t>(copy.dst_staging);
      switch (copy.direction) {
        case BlockCopyDirection::kDeviceToDevice:
          if (src == dst) break;
          FOLIO_CUDA_CHECK(cudaMemcpy2DAsync(staging + dst * sb, layer_bytes_, staging + src * sb, layer_bytes_, sb,
                                             pieces, cudaMemcpyDeviceToDevice, stream_));
          break;
        case BlockCopyDirection::kDeviceToHost:
          FOLIO_CUDA_CHECK(cudaMemcpy2DAsync(host_staging + dst * host_staging_block, sb, staging + src * sb,
                                             layer_bytes_, sb, pieces, cudaMemcpyDeviceToHost, stream_));
          break;
        case BlockCopyDirection::kHostToDevice:
          FOLIO_CUDA_CHECK(cudaMemcpy2DAsync(staging + dst * sb, layer_bytes_, host_staging + src * host_staging_block,
                                             sb, sb, pieces, cudaMemcpyHostToDevice, stream_));
          break;
      }
    }
    switch (copy.direction) {
      case BlockCopyDirection::kDeviceToDevice:
        if (copy.src_block == copy.dst_block) break;
        FOLIO_CUDA_CHECK(cudaMemcpy2DAsync(device + copy.dst_block * block_bytes_, layer_bytes_,
                                           device + copy.src_block * block_bytes_, layer_bytes_, block_bytes_, pieces,
                                           cudaMemcpyDeviceToDevice, stream_));
        break;
      case BlockCopyDirection::kDeviceToHost:
        FOLIO_CUDA_CHECK(cudaMemcpy2DAsync(host + copy.dst_block * host_block, block_bytes_,
                                           device + copy.src_block * block_bytes_, layer_bytes_, block_bytes_, pieces,
                                           cudaMemcpyDeviceToHost, stream_));
        break;
      case BlockCopyDirection::kHostToDevice:
        FOLIO_CUDA_CHECK(cudaMemcpy2DAsync(device + copy.dst_block * block_bytes_, layer_bytes_,
                                           host + copy.src_block * host_block, block_bytes_, block_bytes_, pieces,
                                           cudaMemcpyHostToDevice, stream_));
        break;
    }
  }
}

std::vector<uint8_t> CudaExecutor::read_block(int32_t layer, bool values, int32_t block) {
  std::vector<uint8_t> out(block_bytes_);
  const KvLayerView& view = kv_layers_[static_cast<size_t>(layer)];
  const uint8_t* src = (values ? view.v : view.k) + static_cast<size_t>(block) * block_bytes_;
  FOLIO_CUDA_CHECK(cudaStreamSynchronize(stream_));
  FOLIO_CUDA_CHECK(cudaMemcpy(out.data(), src, block_bytes_, cudaMemcpyDeviceToHost));
  return out;
}

}  // namespace folio::cuda
