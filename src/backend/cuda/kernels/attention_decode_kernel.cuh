// Paged decode attention (one query token per sequence), split-KV ("flash-decoding").
//
// Grid: (grid_splits, num_heads / kGroup, num_seqs). A CTA serves kGroup query heads that
// share one KV head, so each K/V byte it reads is used kGroup times, and it covers one
// tile-aligned chunk of its sequence's context. How a context is cut depends on that context
// alone (attention_plan.h), never on the batch: a sequence's output is bit-identical in any
// batch. CTAs whose split lies past their sequence's split count, and CTAs of sequences with
// query_len != 1 (prefill rows of a mixed batch, served by the prefill kernel), exit at once.
//
// Per tile of kDecodeTileTokens tokens, 128 threads:
//   1. cp.async copies the next tile's K and V rows (gathered through the block table) into
//      the other shared-memory stage while this one is computed: 16 bytes per thread-copy,
//      a half-warp (head_dim 128) or quarter-warp (64) per 256/128-byte token row, so every
//      warp-wide copy is fully coalesced and 8-16 KB per CTA are in flight at any time. The
//      block ids of a tile are read a tile earlier, so issuing the copies never waits on them.
//   2. scores: thread (token group tg, lane-in-row li) dots its 8 dims of K with the 8 dims of
//      each of the kGroup queries it keeps in registers (pre-scaled by scale*log2e), then the
//      lanes of a row reduce by butterfly shuffles; one lane writes the scores to shared.
//   3. softmax: warp w owns heads w, w+4: tile max, running max/sum update (exp2), the
//      probabilities overwrite the scores, the rescale factor goes to shared.
//   4. P.V: each thread rescales its kGroup x 8 accumulators and adds p * V for its rows.
// At the end the accumulators of the token groups are summed through shared memory; when the
// sequence has one split the CTA writes bf16 output, else normalized partials and (max, sum)
// to the workspace for the reduce kernel. Each thread reads from shared only the 16-byte
// chunks it copied itself, and rows of consecutive threads are contiguous: no bank conflicts.
//
// Quantized caches (fp8, int8; kFormat): the same schedule with a lane owning 16 one-byte
// values (one 16-byte cp.async, as in fp16, so half the instructions move the same context),
// each row's float scale copied beside them by the row's first lane; values are unpacked in
// registers, the K scale multiplies the finished dot product and the V scale the probability,
// so no dequantized K or V exists anywhere. The query group is capped at 4 heads a CTA to keep
// the 16-dim query and accumulator registers in budget.
//
// This header holds the kernel; each format family instantiates it in its own translation unit
// (attention_decode_fp16.cu, _quantized.cu, _kivi.cu) so that they compile in parallel, and
// attention_decode.cu dispatches on the format.
#pragma once

#include <cassert>
#include <cmath>

#include "backend/cuda/kernels/attention_decode_launch.h"
#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/kernels/kernels.h"
#include "backend/cuda/kernels/kivi.cuh"
#include "backend/cuda/kernels/kv_quant.cuh"
#include "backend/cuda/programmatic_launch.cuh"

namespace folio::cuda::decode {
namespace {

using namespace detail;

constexpr int kDecodeThreads = 128;

template <int kHeadDim, int kGroup, KvFormat kFormat = KvFormat::kFp16>
struct DecodeShape {
  static constexpr int kHeadDimValue = kHeadDim;
  static constexpr bool kQuantized = kv_format_has_scales(kFormat);  // fp8, int8
  static constexpr bool kKivi = kv_format_is_kivi(kFormat);
  static constexpr int kBits = kKivi ? kivi_bits(kFormat) : 8;
  // Quantized rows are half as long: a tile of twice the tokens keeps as many bytes in flight
  // per CTA as fp16's (at 64 tokens the kernel took fp16's time per token, latency-bound).
  static constexpr int kTile = kQuantized ? 2 * kDecodeTileTokens : kDecodeTileTokens;
  static constexpr int kValueBytes = kQuantized ? 1 : 2;
  static constexpr int kDims = 16 / kValueBytes;                      // dims per lane: one 16-byte chunk
  static constexpr int kLanesPerRow = kHeadDim / kDims;               // 16, 8 or 4
  static constexpr int kRowsPerPass = kDecodeThreads / kLanesPerRow;  // 8, 16 or 32
  static constexpr int kPasses = kTile / kRowsPerPass;                // 8, 4 or 2
  // One K (or V) tile: the values, then (quantized) the rows' scales. KIVI: the tile's raw
  // bytes, two 32-token groups, each either sealed (codes, scales, minima) or staged (fp16
  // rows, the larger), dequantized into an fp16 tile that the fp16 math then reads.
  static constexpr size_t kTileHalfsBytes = static_cast<size_t>(kTile) * kHeadDim * 2;
  static constexpr size_t kStageBytes =
      static_cast<size_t>(kTile) * kHeadDim * kValueBytes + (kQuantized ? kTile * sizeof(float) : 0);
  static constexpr size_t kKvBytes = 2ull * 2 * kStageBytes + (kKivi ? 2 * kTileHalfsBytes : 0);  // K,V x 2 stages
  // KIVI group geometry.
  static constexpr int kChannelBytes = kKiviGroup * kBits / 8;           // a key channel's 32 codes
  static constexpr int kKeyGroupBytes = kHeadDim * (kChannelBytes + 4);  // codes, scales, minima
  static constexpr int kValueRowBytes = kHeadDim * kBits / 8 + kHeadDim / kKiviGroup * 4;
  static constexpr size_t kGroupStageBytes = kStageBytes / 2;  // a group's raw K (or V)
  static constexpr size_t kReduceBytes = static_cast<size_t>(kRowsPerPass) * kGroup * kHeadDim * sizeof(float);
  static constexpr size_t kScoreBytes = static_cast<size_t>(kGroup) * kTile * sizeof(float);
  static constexpr size_t kSmemBytes =
      (kKvBytes > kReduceBytes ? kKvBytes : kReduceBytes) + kScoreBytes + 2 * kGroup * sizeof(float);
};

// KIVI: a tile's raw groups (decode_kernel's load_tile) -> the fp16 K and V tiles
// ([kTile][head_dim] halves) the fp16 math reads. A sealed key group is dequantized one
// channel per thread (its 32 codes are one word run, its scale and minimum one pair), a
// sealed value row 8 dims per thread; staged groups are copied, groups past `end` zeroed.
template <typename S>
__device__ __forceinline__ void dequantize_kivi_tile(const unsigned char* k_raw, const unsigned char* v_raw,
                                                     uint16_t* k_half, uint16_t* v_half, int tile_begin, int end,
                                                     int own_start, int tid) {
  constexpr int kHeadDim = S::kHeadDimValue;
  constexpr int kBits = S::kBits;
  constexpr int kRowChunks = kHeadDim / 8;
  for (int gi = 0; gi < S::kTile / kKiviGroup; ++gi) {
    const int gpos = tile_begin + gi * kKiviGroup;
    const unsigned char* kg = k_raw + gi * S::kGroupStageBytes;
    const unsigned char* vg = v_raw + gi * S::kGroupStageBytes;
    uint16_t* kt = k_half + gi * kKiviGroup * kHeadDim;
    uint16_t* vt = v_half + gi * kKiviGroup * kHeadDim;
    if (gpos >= end || gpos >= own_start) {
      const bool zero = gpos >= end;
      for (int i = tid; i < kKiviGroup * kRowChunks; i += kDecodeThreads) {
        const uint4 kz = zero ? make_uint4(0, 0, 0, 0) : reinterpret_cast<const uint4*>(kg)[i];
        const uint4 vz = zero ? make_uint4(0, 0, 0, 0) : reinterpret_cast<const uint4*>(vg)[i];
        reinterpret_cast<uint4*>(kt)[i] = kz;
        reinterpret_cast<uint4*>(vt)[i] = vz;
      }
      continue;
    }
    for (int c = tid; c < kHeadDim; c += kDecodeThreads) {
      uint32_t words[S::kChannelBytes / 4];
#pragma unroll
      for (int w = 0; w < S::kChannelBytes / 4; ++w) {
        words[w] = reinterpret_cast<const uint32_t*>(kg + c * S::kChannelBytes)[w];
      }
      const float scale = half_at(kg + kHeadDim * S::kChannelBytes + 2 * c);
      const float minimum = half_at(kg + kHeadDim * S::kChannelBytes + 2 * kHeadDim + 2 * c);
#pragma unroll
      for (int t = 0; t < kKiviGroup; ++t) {
        const int bit = t * kBits;
        const int code = (words[bit / 32] >> (bit % 32)) & ((1 << kBits) - 1);
        kt[t * kHeadDim + c] = float_to_half_bits(static_cast<float>(code) * scale + minimum);
      }
    }
    for (int i = tid; i < kKiviGroup * kRowChunks; i += kDecodeThreads) {
      const int row = i / kRowChunks;
      const int chunk = i % kRowChunks;
      const unsigned char* raw = vg + row * S::kValueRowBytes;
      const uint32_t codes = kBits == 2 ? *reinterpret_cast<const uint16_t*>(raw + chunk * 2)
                                        : *reinterpret_cast<const uint32_t*>(raw + chunk * 4);
      const int g = chunk * 8 / kKiviGroup;
      const float scale = half_at(raw + kHeadDim * kBits / 8 + 2 * g);
      const float minimum = half_at(raw + kHeadDim * kBits / 8 + kHeadDim / kKiviGroup * 2 + 2 * g);
      float x[8];
#pragma unroll
      for (int j = 0; j < 8; ++j)
        x[j] = static_cast<float>((codes >> (j * kBits)) & ((1 << kBits) - 1)) * scale + minimum;
      reinterpret_cast<uint4*>(vt)[i] =
          make_uint4(pack_half2(x[0], x[1]), pack_half2(x[2], x[3]), pack_half2(x[4], x[5]), pack_half2(x[6], x[7]));
    }
  }
}

template <int kHeadDim, int kGroup, KvFormat kFormat>
__global__ void __launch_bounds__(kDecodeThreads)
    decode_kernel(const PagedAttentionArgs args, DecodeSplitPolicy policy, int32_t grid_splits, float* partial_out,
                  float2* partial_stats) {
  let_next_kernel_start();  // the output projection after it prefetches its weights meanwhile
  using S = DecodeShape<kHeadDim, kGroup, kFormat>;
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned char* kv_smem = smem;  // [stage][K|V] stages of S::kStageBytes
  constexpr size_t kFirstRegion = S::kKvBytes > S::kReduceBytes ? S::kKvBytes : S::kReduceBytes;
  float* scores = reinterpret_cast<float*>(smem + kFirstRegion);  // [group][tile]
  float* rescale = scores + kGroup * S::kTile;                    // [group]
  float* final_sum = rescale + kGroup;                            // [group]

  const int split = blockIdx.x;
  const int head0 = blockIdx.y * kGroup;
  const int seq = blockIdx.z;
  const KvLayerView& cache = args.cache;
  const int group_size = args.num_heads / cache.num_kv_heads;
  const int kv_head = head0 / group_size;
  const int tid = threadIdx.x;
  const int lane_in_row = tid % S::kLanesPerRow;
  const int row_group = tid / S::kLanesPerRow;
  const int warp = tid / 32;
  const int lane = tid % 32;

  const int token = args.cu_query_starts[seq];
  if (args.cu_query_starts[seq + 1] - token != 1) return;  // a prefill row: not ours
  const int context_len = args.context_lens[seq];
  const int split_tokens = decode_split_tokens(context_len, policy);
  const int num_splits = (context_len + split_tokens - 1) / split_tokens;
  const int begin = split * split_tokens;
  if (begin >= context_len) return;  // past this sequence's splits (or an empty context)
  const int end = min(context_len, begin + split_tokens);
  const size_t partial_index = (static_cast<size_t>(seq) * args.num_heads + head0) * grid_splits + split;
  // KIVI: the blocks before the query's own are sealed; its own block (from own_start) is read
  // in fp16 from the staging block its K/V were just written to.
  int own_start = 0, own_staging = 0;
  if constexpr (S::kKivi) {
    own_start = (context_len - 1) / cache.block_size * cache.block_size;
    const int slot = args.slot_mapping[token];
    own_staging = slot >= 0 ? slot / cache.block_size : 0;  // padding rows read any staging block
  }

  // Queries: this thread's kDims dims of each head, pre-scaled so that softmax can use exp2.
  constexpr int kDims = S::kDims;
  float q[kGroup][kDims];
  const float q_scale = args.scale * kLog2e;
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
#pragma unroll
    for (int c = 0; c < kDims / 8; ++c) {
      const uint4 raw = *reinterpret_cast<const uint4*>(
          args.q + (static_cast<size_t>(token) * args.num_heads + head0 + g) * kHeadDim + lane_in_row * kDims + c * 8);
      float part[8];
      unpack_half8(raw, part);
#pragma unroll
      for (int j = 0; j < 8; ++j) q[g][c * 8 + j] = part[j] * q_scale;
    }
  }

  const int32_t* block_table = args.block_tables + static_cast<size_t>(seq) * args.max_blocks_per_seq;
  const size_t token_stride = static_cast<size_t>(cache.num_kv_heads) * kHeadDim;
  const BlockIndexer indexer(cache.block_size);
  const int num_tiles = (end - begin + S::kTile - 1) / S::kTile;

  // Block ids of this thread's rows in the tile copied next. They are read one tile ahead of
  // their cp.async (while the current tile is computed), so the copy's issue never waits on a
  // block-table load.
  int blocks[S::kPasses];
  auto fetch_blocks = [&](int tile) {
    // A KIVI tile reads its two groups' block ids as it loads.
    if constexpr (!S::kKivi) {
      const int tile_begin = begin + tile * S::kTile;
#pragma unroll
      for (int p = 0; p < S::kPasses; ++p) {
        const int pos = tile_begin + row_group + p * S::kRowsPerPass;
        blocks[p] = pos < end ? block_table[indexer.block(pos)] : 0;
      }
    }
  };
  auto load_tile = [&](int tile, int stage) {  // uses blocks[] of fetch_blocks(tile)
    unsigned char* k_dst = kv_smem + stage * 2 * S::kStageBytes;
    unsigned char* v_dst = k_dst + S::kStageBytes;
    const int tile_begin = begin + tile * S::kTile;
    if constexpr (S::kKivi) {
      // Each 32-token group whole: a sealed group's key bytes are one contiguous run and its
      // value rows kValueRowBytes apart per token; a staged group is 32 fp16 rows. Groups past
      // the split's end are not loaded (dequantize_tile zeroes them).
      for (int gi = 0; gi < S::kTile / kKiviGroup; ++gi) {
        const int gpos = tile_begin + gi * kKiviGroup;
        unsigned char* kg = k_dst + gi * S::kGroupStageBytes;
        unsigned char* vg = v_dst + gi * S::kGroupStageBytes;
        if (gpos >= end) continue;
        if (gpos >= own_start) {
          constexpr int kRowChunks = kHeadDim / 8;
          for (int i = tid; i < kKiviGroup * kRowChunks; i += kDecodeThreads) {
            const int row = i / kRowChunks;
            const int chunk = i % kRowChunks;
            const int pos = gpos + row;
            const bool valid = pos < end;
            const int in_block = valid ? indexer.offset(pos) : 0;
            const int dst = (row * kHeadDim + chunk * 8) * 2;
            cp_async_16(kg + dst, cache.staging_row(0, own_staging, in_block, kv_head) + chunk * 8, valid);
            cp_async_16(vg + dst, cache.staging_row(1, own_staging, in_block, kv_head) + chunk * 8, valid);
          }
        } else {
          const int block = block_table[indexer.block(gpos)];
          const int in_block = indexer.offset(gpos);
          const uint8_t* ksrc = cache.k + cache.kivi_key_group_offset(block, kv_head, in_block / kKiviGroup);
          for (int i = tid; i < S::kKeyGroupBytes / 16; i += kDecodeThreads)
            cp_async_16(kg + 16 * i, ksrc + 16 * i, true);
          constexpr int kRowWords = S::kValueRowBytes / 8;
          for (int i = tid; i < kKiviGroup * kRowWords; i += kDecodeThreads) {
            const int row = i / kRowWords;
            const int word = i % kRowWords;
            const uint8_t* vsrc = cache.v + cache.kivi_value_row_offset(block, in_block + row, kv_head) + 8 * word;
            cp_async_8(vg + row * S::kValueRowBytes + 8 * word, vsrc, true);
          }
        }
      }
    } else {
#pragma unroll
      for (int p = 0; p < S::kPasses; ++p) {
        const int row = row_group + p * S::kRowsPerPass;
        const int pos = tile_begin + row;
        const bool valid = pos < end;
        if constexpr (S::kQuantized) {
          size_t values = 0, scale = 0;
          if (valid) {
            const int in_block = indexer.offset(pos);
            values = cache.value_offset(blocks[p], in_block, kv_head) + lane_in_row * kDims;
            scale = cache.scale_offset(blocks[p], in_block, kv_head);
          }
          const int dst = row * kHeadDim + lane_in_row * kDims;
          cp_async_16(k_dst + dst, cache.k + values, valid);
          cp_async_16(v_dst + dst, cache.v + values, valid);
          if (lane_in_row == 0) {
            const int scale_dst = S::kTile * kHeadDim + row * static_cast<int>(sizeof(float));
            cp_async_4(k_dst + scale_dst, cache.k + scale, valid);
            cp_async_4(v_dst + scale_dst, cache.v + scale, valid);
          }
        } else {
          size_t offset = 0;
          if (valid) {
            const size_t slot = static_cast<size_t>(blocks[p]) * cache.block_size + indexer.offset(pos);
            offset = slot * token_stride + static_cast<size_t>(kv_head) * kHeadDim + lane_in_row * 8;
          }
          const int dst = (row * kHeadDim + lane_in_row * 8) * 2;
          cp_async_16(k_dst + dst, cache.fp16_keys() + offset, valid);
          cp_async_16(v_dst + dst, cache.fp16_values() + offset, valid);
        }
      }
    }
  };

  float acc[kGroup][kDims];
#pragma unroll
  for (int g = 0; g < kGroup; ++g)
#pragma unroll
    for (int j = 0; j < kDims; ++j) acc[g][j] = 0.0f;
  // Running max and sum of heads warp and warp + 4 (valid in warp w for g = w + 4i < kGroup).
  float run_max[2] = {-INFINITY, -INFINITY};
  float run_sum[2] = {0.0f, 0.0f};

  fetch_blocks(0);
  load_tile(0, 0);
  cp_async_commit();
  if (num_tiles > 1) fetch_blocks(1);
  for (int tile = 0; tile < num_tiles; ++tile) {
    const int stage = tile & 1;
    if (tile + 1 < num_tiles) {
      load_tile(tile + 1, stage ^ 1);
      cp_async_commit();
      if (tile + 2 < num_tiles) fetch_blocks(tile + 2);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    const unsigned char* k_tile = kv_smem + stage * 2 * S::kStageBytes;
    const unsigned char* v_tile = k_tile + S::kStageBytes;
    if constexpr (S::kKivi) {
      uint16_t* k_half = reinterpret_cast<uint16_t*>(kv_smem + 4 * S::kStageBytes);
      uint16_t* v_half = k_half + S::kTile * kHeadDim;
      __syncthreads();  // every thread's copies have landed
      dequantize_kivi_tile<S>(k_tile, v_tile, k_half, v_half, begin + tile * S::kTile, end, own_start, tid);
      __syncthreads();
      k_tile = reinterpret_cast<const unsigned char*>(k_half);
      v_tile = reinterpret_cast<const unsigned char*>(v_half);
    }
    const float* k_scales = reinterpret_cast<const float*>(k_tile + S::kTile * kHeadDim);  // quantized only
    const float* v_scales = reinterpret_cast<const float*>(v_tile + S::kTile * kHeadDim);
    const int tile_begin = begin + tile * S::kTile;

    // 2. scores
#pragma unroll
    for (int p = 0; p < S::kPasses; ++p) {
      const int row = row_group + p * S::kRowsPerPass;
      float k[kDims];
      if constexpr (S::kQuantized) {
        kv_unpack16(kFormat, *reinterpret_cast<const uint4*>(k_tile + row * kHeadDim + lane_in_row * kDims), k);
      } else if constexpr (kFormat == KvFormat::kBf16) {
        unpack_bf16x8(*reinterpret_cast<const uint4*>(k_tile + (row * kHeadDim + lane_in_row * 8) * 2), k);
      } else {
        unpack_half8(*reinterpret_cast<const uint4*>(k_tile + (row * kHeadDim + lane_in_row * 8) * 2), k);
      }
      float dot[kGroup];
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        float d = 0.0f;
#pragma unroll
        for (int j = 0; j < kDims; ++j) d = fmaf(q[g][j], k[j], d);
        dot[g] = d;
      }
#pragma unroll
      for (int offset = S::kLanesPerRow / 2; offset > 0; offset >>= 1) {
#pragma unroll
        for (int g = 0; g < kGroup; ++g) dot[g] += __shfl_xor_sync(0xffffffffu, dot[g], offset);
      }
      if (lane_in_row == 0) {
        const bool valid = tile_begin + row < end;
        const float k_scale = S::kQuantized ? k_scales[row] : 1.0f;
#pragma unroll
        for (int g = 0; g < kGroup; ++g) scores[g * S::kTile + row] = valid ? dot[g] * k_scale : -INFINITY;
      }
    }
    __syncthreads();

    // 3. softmax bookkeeping, one warp per head (two heads per warp for kGroup > 4)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int g = warp + 4 * i;
      if (g < kGroup) {
        float* s = scores + g * S::kTile;
        float local = -INFINITY;
        for (int r = lane; r < S::kTile; r += 32) local = fmaxf(local, s[r]);
        const float new_max = fmaxf(run_max[i], warp_max(local));  // finite: the tile has a valid row
        float sum = 0.0f;
        for (int r = lane; r < S::kTile; r += 32) {
          const float e = exp2f(s[r] - new_max);
          s[r] = e;
          sum += e;
        }
        sum = warp_sum(sum);
        const float alpha = exp2f(run_max[i] - new_max);
        run_sum[i] = run_sum[i] * alpha + sum;
        run_max[i] = new_max;
        if (lane == 0) rescale[g] = alpha;
      }
    }
    __syncthreads();

    // 4. P.V
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      const float alpha = rescale[g];
#pragma unroll
      for (int j = 0; j < kDims; ++j) acc[g][j] *= alpha;
    }
#pragma unroll
    for (int p = 0; p < S::kPasses; ++p) {
      const int row = row_group + p * S::kRowsPerPass;
      float v[kDims];
      float v_scale = 1.0f;
      if constexpr (S::kQuantized) {
        kv_unpack16(kFormat, *reinterpret_cast<const uint4*>(v_tile + row * kHeadDim + lane_in_row * kDims), v);
        v_scale = v_scales[row];
      } else if constexpr (kFormat == KvFormat::kBf16) {
        unpack_bf16x8(*reinterpret_cast<const uint4*>(v_tile + (row * kHeadDim + lane_in_row * 8) * 2), v);
      } else {
        unpack_half8(*reinterpret_cast<const uint4*>(v_tile + (row * kHeadDim + lane_in_row * 8) * 2), v);
      }
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        const float prob = scores[g * S::kTile + row] * v_scale;
#pragma unroll
        for (int j = 0; j < kDims; ++j) acc[g][j] = fmaf(prob, v[j], acc[g][j]);
      }
    }
    __syncthreads();  // the next iteration overwrites this stage and the scores
  }

  // Sum the row groups' accumulators (the K/V stages are free now).
  float* reduce = reinterpret_cast<float*>(smem);  // [row_group][group][head_dim]
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    float4* dst = reinterpret_cast<float4*>(reduce + (row_group * kGroup + g) * kHeadDim + lane_in_row * kDims);
#pragma unroll
    for (int c = 0; c < kDims / 4; ++c)
      dst[c] = make_float4(acc[g][4 * c], acc[g][4 * c + 1], acc[g][4 * c + 2], acc[g][4 * c + 3]);
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int g = warp + 4 * i;
    if (g < kGroup && lane == 0) final_sum[g] = run_sum[i];
  }
  // Stats of the split: warp w lane 0 knows heads w, w+4.
  if (num_splits > 1 && lane == 0) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int g = warp + 4 * i;
      if (g < kGroup) {
        partial_stats[partial_index + static_cast<size_t>(g) * grid_splits] = make_float2(run_max[i], run_sum[i]);
      }
    }
  }
  __syncthreads();
  for (int i = tid; i < kGroup * kHeadDim; i += kDecodeThreads) {
    const int g = i / kHeadDim;
    const int d = i % kHeadDim;
    float total = 0.0f;
#pragma unroll
    for (int r = 0; r < S::kRowsPerPass; ++r) total += reduce[(r * kGroup + g) * kHeadDim + d];
    const float value = total / final_sum[g];
    if (num_splits == 1) {
      args.out[(static_cast<size_t>(token) * args.num_heads + head0 + g) * kHeadDim + d] = float_to_bf16_bits(value);
    } else {
      partial_out[(partial_index + static_cast<size_t>(g) * grid_splits) * kHeadDim + d] = value;
    }
  }
}

template <int kHeadDim, int kGroup, KvFormat kFormat>
void launch_decode_format(const PagedAttentionArgs& args, DecodeSplitPolicy policy, int32_t grid_splits,
                          float* partial_out, float2* partial_stats, Stream stream) {
  using S = DecodeShape<kHeadDim, kGroup, kFormat>;
  auto* kernel = decode_kernel<kHeadDim, kGroup, kFormat>;
  static const bool attribute_set = [&] {
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(S::kSmemBytes));
    return true;
  }();
  (void)attribute_set;
  const dim3 grid(grid_splits, args.num_heads / kGroup, args.num_seqs);
  kernel<<<grid, kDecodeThreads, S::kSmemBytes, stream>>>(args, policy, grid_splits, partial_out, partial_stats);
}

template <int kHeadDim, KvFormat kFormat>
void launch_for_dim(const PagedAttentionArgs& args, DecodeSplitPolicy policy, int32_t grid_splits, float* partial_out,
                    float2* partial_stats, Stream stream) {
  // fp8/int8 keep 16-dim queries and accumulators in registers: 4 heads a CTA at most. The
  // 16-bit formats and KIVI (which runs the fp16 math on its dequantized tile) take 8.
  constexpr int kMost = kv_format_has_scales(kFormat) ? 4 : 8;
  const int group = largest_group_tile(args.num_heads / args.cache.num_kv_heads, kMost);
#define FOLIO_DECODE_GROUP(G)                                                                                  \
  case G:                                                                                                      \
    if constexpr (G <= kMost) {                                                                                \
      return launch_decode_format<kHeadDim, G, kFormat>(args, policy, grid_splits, partial_out, partial_stats, \
                                                        stream);                                               \
    }                                                                                                          \
    break;
  switch (group) {
    FOLIO_DECODE_GROUP(1)
    FOLIO_DECODE_GROUP(2)
    FOLIO_DECODE_GROUP(3)
    FOLIO_DECODE_GROUP(4)
    FOLIO_DECODE_GROUP(5)
    FOLIO_DECODE_GROUP(6)
    FOLIO_DECODE_GROUP(7)
    FOLIO_DECODE_GROUP(8)
    default: break;
  }
#undef FOLIO_DECODE_GROUP
}

}  // namespace

template <KvFormat kFormat>
void launch_decode_kernels(const PagedAttentionArgs& args, DecodeSplitPolicy policy, int32_t grid_splits,
                           float* partial_out, float2* partial_stats, Stream stream) {
  if (args.cache.head_dim == 64) {
    launch_for_dim<64, kFormat>(args, policy, grid_splits, partial_out, partial_stats, stream);
  } else {
    launch_for_dim<128, kFormat>(args, policy, grid_splits, partial_out, partial_stats, stream);
  }
}

}  // namespace folio::cuda::decode
