// A random paged-attention problem on host and device, shared by the attention checks and the
// benchmarks: a permuted block pool, padded block tables whose padding and unused slots point
// at NaN-filled K/V (a kernel that reads past a context or into padding produces NaN), fp16
// queries, and the argument struct for the kernels.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "backend/cuda/kernels/kernels.h"
#include "check_util.h"

namespace folio::cuda::check {

struct SeqSpec {
  int32_t query_len;
  int32_t context_len;  // >= query_len
};

struct AttentionProblem {
  int32_t head_dim = 128, num_heads = 32, num_kv_heads = 8, block_size = 16;
  std::vector<SeqSpec> seqs;
  float q_scale = 1.0f;  // queries ~ U(-q_scale, q_scale); larger = peakier softmax
  // fp8 / int8: the fp16 K/V rows are quantized on the host (kv/kv_quant.h) into kq/vq, which
  // are what the device holds; the reference reads the same bytes.
  KvFormat format = KvFormat::kFp16;
  int32_t window = 0;  // sliding window (0: none), passed to the kernels and the reference

  // Host data.
  int32_t num_tokens = 0, num_blocks = 0, max_blocks_per_seq = 0, max_query_len = 0, max_context_len = 0;
  std::vector<uint16_t> q, k, v;  // fp16 bits
  std::vector<uint8_t> kq, vq;    // quantized formats: the cache's bytes
  // Residual formats (KIVI, fp8): each sequence's blocks from the one holding its first query
  // row on are staged (their fp16 rows in staging blocks, ids in staging_tables, -1 elsewhere);
  // every full block is sealed from its rows (kv_seal_block), so a chunk's queries see the blocks it filled sealed, as in
  // the engine. Partial blocks' bytes and staging block 0 stay 0xff (NaN scales, NaN halves).
  std::vector<uint16_t> sk, sv;
  std::vector<int32_t> first_staged, staging_tables, slots;
  int32_t num_staging = 0;
  std::vector<int32_t> cu_query_starts, context_lens, block_tables;
  // Device data.
  DeviceBuffer<uint16_t> d_q, d_k, d_v, d_out;
  DeviceBuffer<int32_t> d_cu, d_ctx, d_tables, d_slots;
  DeviceBuffer<uint16_t> d_sk, d_sv;

  std::string describe() const;
  // Fills host data, uploads it; fill_values = false leaves K/V values unspecified (benchmarks).
  void build(std::mt19937_64& rng, bool fill_values = true);
  void build_residual(bool fill_values);  // build()'s residual-format part, once q/k/v and the block tables exist
  PagedAttentionArgs args() const;
  size_t kv_bytes_read() const;  // K and V bytes attention must read (each token once per kv head)
};

// float64 reference (cpu::paged_attention_reference) for the given query tokens, as a flat
// (tokens.size(), num_heads, head_dim) array; rows are spread over host_threads() threads.
std::vector<double> reference_rows(const AttentionProblem& p, const std::vector<int32_t>& tokens);
size_t host_threads();

}  // namespace folio::cuda::check
