// How big a paged KV pool is, in one place for every executor: the shape of a block for a model,
// and how many blocks a byte budget buys (plus block 0, the reserved null block that no sequence
// ever holds, so a budget of B bytes gives floor(B / bytes_per_block) usable blocks).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kv/kv_cache_storage.h"
#include "kv/kv_groups.h"
#include "model/model_config.h"

namespace folio {

// Where an executor's KV memory comes from. The device pool's size is given in bytes (a GPU
// executor may instead size it from free memory, see its options); swap_space_bytes > 0 adds a
// host pool for preemption by swap.
struct KvCacheOptions {
  int64_t kv_cache_bytes = int64_t{256} << 20;  // K and V, all layers
  int32_t block_size = 16;
  int64_t swap_space_bytes = 0;
  KvFormat format = KvFormat::kFp16;  // --kv-cache-dtype: the pool holds more tokens per byte
  // Residual formats: fp16 staging blocks for unsealed blocks, taken from kv_cache_bytes. 0
  // sizes them for an engine of max_num_seqs and max_num_batched_tokens (kv_staging_blocks).
  int32_t num_staging_blocks = 0;
  // The pool lays block ids over the staging blocks' bytes and hands them out while no sequence
  // stages there (kv/block_pool.h), so staging blocks can be sized for every running sequence
  // without idling memory. false: staging blocks hold nothing else (at most a quarter).
  bool staging_overlay = true;
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  // Sliding-window layers get their own block tables, whose blocks go back to the pool once out
  // of every query's window (kv_groups.h); false keeps every layer's whole context.
  bool release_window_blocks = true;
};

// The model's layers grouped by the context they see (kv_groups.h).
inline KvGroups kv_groups_of(const ModelConfig& config, bool release_window_blocks = true) {
  std::vector<int32_t> windows(static_cast<size_t>(config.num_layers));
  for (int32_t l = 0; l < config.num_layers; ++l) windows[static_cast<size_t>(l)] = config.layer_window(l);
  return kv_groups_for(windows, release_window_blocks);
}

// Staging blocks a residual format wants so that allocation rarely waits for one: every
// running sequence's partial last block (a fork shares its parent's until its first write
// copies it, and is a running sequence itself) and the blocks one step fills. A request with
// more samples or beams than max_num_seqs (admitted alone) can want more: allocation then says
// no and the scheduler preempts, as when blocks run out. The host pool gets as many, for the
// partial blocks of swapped sequences.
inline int32_t kv_staging_blocks_for(int32_t max_num_seqs, int32_t max_batched_tokens, int32_t block_size) {
  return max_num_seqs + (max_batched_tokens + block_size - 1) / block_size + 1;
}

// The most of a budget staging blocks take: without the overlay their bytes hold nothing else,
// so a small budget must not be all residual (fewer sequences then grow partial blocks at once;
// the others wait or are preempted, and the pool holds more tokens). With it idle staging bytes
// hold sealed blocks, and the cap only keeps half the pool in plain blocks, where the prefix
// cache lives.
inline int64_t kv_staging_budget(int64_t kv_cache_bytes, bool staging_overlay) {
  return staging_overlay ? kv_cache_bytes / 2 : kv_cache_bytes / 4;
}

// The staging blocks a pool gets: num_staging_blocks when given; else what the engine wants
// (kv_staging_blocks_for), at most kv_staging_budget's worth (and at least 3, what one sequence
// needs).
inline int32_t kv_staging_blocks(const KvCacheOptions& kv, const ModelConfig& config) {
  if (!kv_format_has_residual(kv.format)) return 0;
  if (kv.num_staging_blocks > 0) return kv.num_staging_blocks;
  // Every block-table group's partial blocks want their own (each 1 / num_groups of the bytes).
  const KvGroups groups = kv_groups_of(config, kv.release_window_blocks);
  const int32_t wanted =
      kv_staging_blocks_for(kv.max_num_seqs, kv.max_num_batched_tokens, kv.block_size) * groups.num_groups();
  const auto staging_bytes = static_cast<int64_t>(
      KvCacheShape{groups.num_slots, 1, kv.block_size, config.num_kv_heads, config.head_dim, kv.format}
          .bytes_per_staging_block());
  const int64_t most = kv_staging_budget(kv.kv_cache_bytes, kv.staging_overlay) / staging_bytes;
  return static_cast<int32_t>(std::max<int64_t>(3 * groups.num_groups(), std::min<int64_t>(wanted, most)));
}

// A block holds the layer slots of one group (kv_groups.h): every layer with one group.
inline KvCacheShape kv_cache_shape(const ModelConfig& config, int32_t num_blocks, int32_t block_size,
                                   KvFormat format = KvFormat::kFp16, int32_t num_staging_blocks = 0,
                                   bool release_window_blocks = true) {
  return KvCacheShape{kv_groups_of(config, release_window_blocks).num_slots,
                      num_blocks,
                      block_size,
                      config.num_kv_heads,
                      config.head_dim,
                      format,
                      num_staging_blocks};
}

// One block id's bytes: what a budget is divided by.
inline int64_t kv_bytes_per_block(const ModelConfig& config, int32_t block_size, KvFormat format = KvFormat::kFp16,
                                  bool release_window_blocks = true) {
  return static_cast<int64_t>(
      kv_cache_shape(config, 1, block_size, format, 0, release_window_blocks).bytes_per_block());
}

// K and V of one token, all layers, scales included: what /metrics and bench report.
inline double kv_bytes_per_token(const ModelConfig& config, KvFormat format) {
  return static_cast<double>(kv_bytes_per_block(config, 16, format, false)) / 16.0;
}

// The budget a pool for one sequence of num_tokens needs in kv's format and block size, its
// staging blocks included (residual formats): what `folio perplexity` and `folio bench` ask for.
// Every group's table covers the tokens (nothing released: a single sequence keeps it all).
inline int64_t kv_bytes_for_tokens(const ModelConfig& config, const KvCacheOptions& kv, int64_t num_tokens) {
  const int64_t blocks =
      (num_tokens + kv.block_size - 1) / kv.block_size * kv_groups_of(config, kv.release_window_blocks).num_groups();
  const int64_t staging =
      static_cast<int64_t>(kv_staging_blocks(kv, config)) *
      static_cast<int64_t>(
          kv_cache_shape(config, 1, kv.block_size, kv.format, 0, kv.release_window_blocks).bytes_per_staging_block());
  return blocks * kv_bytes_per_block(config, kv.block_size, kv.format, kv.release_window_blocks) + staging;
}

// Blocks a budget buys, the null block included; 0 for no budget at all (no pool).
inline int32_t kv_blocks_for_budget(int64_t budget_bytes, int64_t bytes_per_block) {
  if (budget_bytes <= 0 || bytes_per_block <= 0) return 0;
  return static_cast<int32_t>(std::min<int64_t>(budget_bytes / bytes_per_block, int64_t{1} << 30)) + 1;
}

}  // namespace folio
