// Paged decode attention on tensor cores for the quantized caches (fp8, int8, kivi4, kivi2).
//
// The CUDA-core decode kernel (attention_decode_kernel.cuh) is bound by reading fp16 K/V, which
// is what it should be; with a quarter to a sixth of the bytes, the quantized formats make it
// bound by its own arithmetic (unpacking, then kGroup FMAs per value and shuffles per key)
// instead. Here the query heads of a GQA group are the rows of an m16n8k16 MMA, so the dot
// products and P.V cost a few MMAs per 16 keys and what is left is unpacking each value once.
//
// Grid: (grid_splits, num_heads / rows, num_seqs), as the CUDA-core kernel's, with up to 16
// query heads of one KV head per CTA (rows beyond the group are zero queries, computed and
// dropped). Splits are the same (attention_plan.h), so the output goes through the same reduce.
// Per 64-key tile, 4 warps:
//   1. cp.async copies the next tile's raw bytes (the format's values and scales, or KIVI's
//      sealed groups and staged fp16 rows) into the other stage of a raw ring;
//   2. all threads convert this tile's raw bytes into swizzled fp16 K and V tiles: fp8 and int8
//      values exactly (every E4M3 and every int8 is an fp16), KIVI's codes as code * s + m;
//   3. warp w takes keys 16w..16w+15: S = Q K^T by MMA (the fp8/int8 K scale multiplies S's
//      columns), mask, online softmax in exp2, P (times the V scale of its key, for fp8/int8)
//      rounded to fp16 in registers, O += P V by MMA with V loaded by ldmatrix.trans.
// At the end the 4 warps' (max, sum, O) are merged through shared memory and the CTA writes
// bf16 output (one split) or a normalized partial and its (max, sum).
#include <cassert>
#include <cmath>

#include "backend/cuda/kernels/attention_decode_launch.h"
#include "backend/cuda/kernels/attention_prefill_common.cuh"
#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/kernels/kivi.cuh"
#include "backend/cuda/kernels/kv_quant.cuh"

namespace folio::cuda::decode {
namespace {

using namespace detail;
using prefill::swizzled;

constexpr int kTcThreads = 128;
constexpr int kTcWarps = kTcThreads / 32;
constexpr int kTcTile = kDecodeTileTokens;  // 64 keys, 16 per warp
constexpr int kTcRows = 16;                 // query heads per CTA at most (the MMA's M)

template <int kHeadDim, KvFormat kFormat>
struct TcShape {
  static constexpr bool kKivi = kv_format_is_kivi(kFormat);
  static constexpr int kChunks = kHeadDim / 8;  // 16-byte fp16 chunks per row
  static constexpr int kTileHalfs = kTcTile * kHeadDim;
  static constexpr int kGroupRawBytes = kKiviGroup * kHeadDim * 2;  // a staged group, the larger
  // One raw K (or V) tile: fp8/int8 values [64][head_dim] then 64 float scales; KIVI two groups.
  static constexpr int kRawBytes = kKivi ? 2 * kGroupRawBytes : kTcTile * kHeadDim + kTcTile * 4;
  static constexpr size_t kQBytes = kTcRows * kHeadDim * 2;
  static constexpr size_t kRawOffset = kQBytes;
  static constexpr size_t kTilesOffset = kRawOffset + 2ull * 2 * kRawBytes;      // 2 stages x (K, V)
  static constexpr size_t kScalesOffset = kTilesOffset + 2ull * kTileHalfs * 2;  // fp8/int8: K, V scales
  static constexpr size_t kMainBytes = kScalesOffset + 2ull * kTcTile * sizeof(float);
  // The merge at the end: each warp's O rows and (max, sum) per row.
  static constexpr size_t kMergeBytes = static_cast<size_t>(kTcWarps) * kTcRows * (kHeadDim + 2) * sizeof(float);
  static constexpr size_t kSmemBytes = kMainBytes > kMergeBytes ? kMainBytes : kMergeBytes;
};

// KIVI's group geometry (kv_format.h), instantiated for the KIVI formats only.
template <int kHeadDim, int kBits>
struct KiviGeometry {
  static constexpr int kChannelBytes = kKiviGroup * kBits / 8;  // a key channel's 32 codes
  static constexpr int kKeyGroupBytes = kHeadDim * (kChannelBytes + 4);
  static constexpr int kValueRowBytes = kHeadDim * kBits / 8 + kHeadDim / kKiviGroup * 4;
};

template <int kHeadDim, KvFormat kFormat>
__global__ void __launch_bounds__(kTcThreads)
    decode_tc_kernel(const PagedAttentionArgs args, DecodeSplitPolicy policy, int32_t grid_splits, int32_t rows,
                     float* partial_out, float2* partial_stats) {
  using S = TcShape<kHeadDim, kFormat>;
  extern __shared__ __align__(128) unsigned char smem[];
  uint16_t* q_smem = reinterpret_cast<uint16_t*>(smem);
  unsigned char* raw_smem = smem + S::kRawOffset;  // [stage][K | V] raw tiles
  uint16_t* k_tile = reinterpret_cast<uint16_t*>(smem + S::kTilesOffset);
  uint16_t* v_tile = k_tile + S::kTileHalfs;
  // The tile's K and V scales (fp8/int8), copied out of the raw stage by convert(): the raw
  // stage takes the tile after next while slower warps still compute on this one.
  float* k_scales = reinterpret_cast<float*>(smem + S::kScalesOffset);
  float* v_scales = k_scales + kTcTile;

  const int split = blockIdx.x;
  const int head0 = blockIdx.y * rows;
  const int seq = blockIdx.z;
  const KvLayerView& cache = args.cache;
  const int group_size = args.num_heads / cache.num_kv_heads;
  const int kv_head = head0 / group_size;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int group_row = lane / 4;
  const int quad_lane = lane % 4;

  const int token = args.cu_query_starts[seq];
  if (args.cu_query_starts[seq + 1] - token != 1) return;  // a prefill row: not ours
  const int context_len = args.context_lens[seq];
  const int split_tokens = decode_split_tokens(context_len, policy);
  const int num_splits = (context_len + split_tokens - 1) / split_tokens;
  const int begin = split * split_tokens;
  if (begin >= context_len) return;
  const int end = min(context_len, begin + split_tokens);
  const int num_tiles = (end - begin + kTcTile - 1) / kTcTile;
  const size_t partial_index = (static_cast<size_t>(seq) * args.num_heads + head0) * grid_splits + split;
  const int32_t* block_table = args.block_tables + static_cast<size_t>(seq) * args.max_blocks_per_seq;
  const BlockIndexer indexer(cache.block_size);
  int own_start = context_len, own_staging = 0;  // KIVI: the query's own block is staged
  if constexpr (S::kKivi) {
    own_start = (context_len - 1) / cache.block_size * cache.block_size;
    const int slot = args.slot_mapping[token];
    own_staging = slot >= 0 ? slot / cache.block_size : 0;
  }

  // Q: rows [0, rows) are the CTA's heads, the rest zero.
  for (int c = tid; c < kTcRows * S::kChunks; c += kTcThreads) {
    const int row = c / S::kChunks;
    const int chunk = c % S::kChunks;
    const bool valid = row < rows;
    const uint16_t* src = args.q;
    if (valid) src += (static_cast<size_t>(token) * args.num_heads + head0 + row) * kHeadDim + chunk * 8;
    cp_async_16(q_smem + swizzled<kHeadDim>(row, chunk), src, valid);
  }

  auto load_raw = [&](int tile, int stage) {
    unsigned char* k_dst = raw_smem + stage * 2 * S::kRawBytes;
    unsigned char* v_dst = k_dst + S::kRawBytes;
    const int tile_begin = begin + tile * kTcTile;
    if constexpr (S::kKivi) {
      using G = KiviGeometry<kHeadDim, kivi_bits(kFormat)>;
      for (int gi = 0; gi < kTcTile / kKiviGroup; ++gi) {
        const int gpos = tile_begin + gi * kKiviGroup;
        unsigned char* kg = k_dst + gi * S::kGroupRawBytes;
        unsigned char* vg = v_dst + gi * S::kGroupRawBytes;
        if (gpos >= end) continue;
        if (gpos >= own_start) {
          for (int i = tid; i < kKiviGroup * S::kChunks; i += kTcThreads) {
            const int row = i / S::kChunks;
            const int chunk = i % S::kChunks;
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
          for (int i = tid; i < G::kKeyGroupBytes / 16; i += kTcThreads) cp_async_16(kg + 16 * i, ksrc + 16 * i, true);
          constexpr int kRowWords = G::kValueRowBytes / 8;
          for (int i = tid; i < kKiviGroup * kRowWords; i += kTcThreads) {
            const int row = i / kRowWords;
            const int word = i % kRowWords;
            const uint8_t* vsrc = cache.v + cache.kivi_value_row_offset(block, in_block + row, kv_head) + 8 * word;
            cp_async_8(vg + row * G::kValueRowBytes + 8 * word, vsrc, true);
          }
        }
      }
    } else {
      constexpr int kRowChunks = kHeadDim / 16;  // 16-byte chunks of one-byte values
      for (int i = tid; i < kTcTile * kRowChunks; i += kTcThreads) {
        const int row = i / kRowChunks;
        const int chunk = i % kRowChunks;
        const int pos = tile_begin + row;
        const bool valid = pos < end;
        size_t values = 0, scale = 0;
        if (valid) {
          const int block = block_table[indexer.block(pos)];
          const int in_block = indexer.offset(pos);
          values = cache.value_offset(block, in_block, kv_head) + chunk * 16;
          scale = cache.scale_offset(block, in_block, kv_head);
        }
        cp_async_16(k_dst + row * kHeadDim + chunk * 16, cache.k + values, valid);
        cp_async_16(v_dst + row * kHeadDim + chunk * 16, cache.v + values, valid);
        if (chunk == 0) {
          cp_async_4(k_dst + kTcTile * kHeadDim + row * 4, cache.k + scale, valid);
          cp_async_4(v_dst + kTcTile * kHeadDim + row * 4, cache.v + scale, valid);
        }
      }
    }
  };

  // Raw tile -> the fp16 K and V tiles (swizzled rows, as the prefill kernels keep them).
  auto convert = [&](int tile, int stage) {
    const unsigned char* k_raw = raw_smem + stage * 2 * S::kRawBytes;
    const unsigned char* v_raw = k_raw + S::kRawBytes;
    const int tile_begin = begin + tile * kTcTile;
    if constexpr (S::kKivi) {
      using G = KiviGeometry<kHeadDim, kivi_bits(kFormat)>;
      for (int gi = 0; gi < kTcTile / kKiviGroup; ++gi) {
        const int gpos = tile_begin + gi * kKiviGroup;
        const unsigned char* kg = k_raw + gi * S::kGroupRawBytes;
        const unsigned char* vg = v_raw + gi * S::kGroupRawBytes;
        if (gpos >= end || gpos >= own_start) {  // zeros, or staged fp16 rows copied as they are
          const bool zero = gpos >= end;
          for (int i = tid; i < kKiviGroup * S::kChunks; i += kTcThreads) {
            const int row = i / S::kChunks;
            const int chunk = i % S::kChunks;
            const int dst = swizzled<kHeadDim>(gi * kKiviGroup + row, chunk);
            const uint4 kz = zero ? make_uint4(0, 0, 0, 0) : reinterpret_cast<const uint4*>(kg)[i];
            const uint4 vz = zero ? make_uint4(0, 0, 0, 0) : reinterpret_cast<const uint4*>(vg)[i];
            *reinterpret_cast<uint4*>(k_tile + dst) = kz;
            *reinterpret_cast<uint4*>(v_tile + dst) = vz;
          }
          continue;
        }
        // Sealed keys: a thread per channel, its 32 codes one word run.
        for (int c = tid; c < kHeadDim; c += kTcThreads) {
          uint32_t words[G::kChannelBytes / 4];
#pragma unroll
          for (int w = 0; w < G::kChannelBytes / 4; ++w) {
            words[w] = reinterpret_cast<const uint32_t*>(kg + c * G::kChannelBytes)[w];
          }
          const float scale = half_at(kg + kHeadDim * G::kChannelBytes + 2 * c);
          const float minimum = half_at(kg + kHeadDim * G::kChannelBytes + 2 * kHeadDim + 2 * c);
#pragma unroll
          for (int t = 0; t < kKiviGroup; ++t) {
            const int bit = t * kivi_bits(kFormat);
            const int code = (words[bit / 32] >> (bit % 32)) & ((1 << kivi_bits(kFormat)) - 1);
            k_tile[swizzled<kHeadDim>(gi * kKiviGroup + t, c / 8) + c % 8] =
                float_to_half_bits(static_cast<float>(code) * scale + minimum);
          }
        }
        // Sealed values: 8 dims of one row per unit.
        for (int i = tid; i < kKiviGroup * S::kChunks; i += kTcThreads) {
          const int row = i / S::kChunks;
          const int chunk = i % S::kChunks;
          const unsigned char* raw = vg + row * G::kValueRowBytes;
          const uint32_t codes = kivi_bits(kFormat) == 2 ? *reinterpret_cast<const uint16_t*>(raw + chunk * 2)
                                                         : *reinterpret_cast<const uint32_t*>(raw + chunk * 4);
          const int g = chunk * 8 / kKiviGroup;
          const float scale = half_at(raw + kHeadDim * kivi_bits(kFormat) / 8 + 2 * g);
          const float minimum = half_at(raw + kHeadDim * kivi_bits(kFormat) / 8 + kHeadDim / kKiviGroup * 2 + 2 * g);
          float x[8];
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            x[j] = static_cast<float>((codes >> (j * kivi_bits(kFormat))) & ((1 << kivi_bits(kFormat)) - 1)) * scale +
                   minimum;
          }
          *reinterpret_cast<uint4*>(v_tile + swizzled<kHeadDim>(gi * kKiviGroup + row, chunk)) = make_uint4(
              pack_half2(x[0], x[1]), pack_half2(x[2], x[3]), pack_half2(x[4], x[5]), pack_half2(x[6], x[7]));
        }
      }
    } else {
      // fp8/int8 values to fp16 exactly (the scales are applied to S and P); rows past `end`
      // were zero-filled by their copy.
      if (tid < kTcTile) {
        k_scales[tid] = reinterpret_cast<const float*>(k_raw + kTcTile * kHeadDim)[tid];
        v_scales[tid] = reinterpret_cast<const float*>(v_raw + kTcTile * kHeadDim)[tid];
      }
      for (int i = tid; i < kTcTile * S::kChunks; i += kTcThreads) {
        const int row = i / S::kChunks;
        const int chunk = i % S::kChunks;
        float k[8], v[8];
        kv_unpack8(kFormat, *reinterpret_cast<const uint2*>(k_raw + row * kHeadDim + chunk * 8), k);
        kv_unpack8(kFormat, *reinterpret_cast<const uint2*>(v_raw + row * kHeadDim + chunk * 8), v);
        const int dst = swizzled<kHeadDim>(row, chunk);
        *reinterpret_cast<uint4*>(k_tile + dst) =
            make_uint4(pack_half2(k[0], k[1]), pack_half2(k[2], k[3]), pack_half2(k[4], k[5]), pack_half2(k[6], k[7]));
        *reinterpret_cast<uint4*>(v_tile + dst) =
            make_uint4(pack_half2(v[0], v[1]), pack_half2(v[2], v[3]), pack_half2(v[4], v[5]), pack_half2(v[6], v[7]));
      }
    }
  };

  load_raw(0, 0);
  cp_async_commit();  // group 0: Q and tile 0

  uint32_t q_frag[kHeadDim / 16][4];
  float o[kHeadDim / 8][4];
#pragma unroll
  for (int nb = 0; nb < kHeadDim / 8; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[nb][e] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f};  // this thread's share; the quad is summed at the end
  const float score_scale = args.scale * kLog2e;
  const int key_base = warp * 16;  // this warp's keys within a tile

  for (int j = 0; j < num_tiles; ++j) {
    const int stage = j & 1;
    if (j + 1 < num_tiles) {
      load_raw(j + 1, stage ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // tile j's raw bytes (and, at j == 0, Q) are in; the last tile's math is done
    if (j == 0) {
#pragma unroll
      for (int ks = 0; ks < kHeadDim / 16; ++ks) {
        ldmatrix_x4(q_frag[ks], q_smem + swizzled<kHeadDim>(lane % 16, ks * 2 + lane / 16));
      }
    }
    convert(j, stage);
    __syncthreads();
    const int tile_begin = begin + j * kTcTile;
    if (tile_begin + key_base >= end) continue;  // every key of this warp is past the split (uniform per warp)

    // S = Q K^T for 16 rows x this warp's 16 keys.
    float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int ks = 0; ks < kHeadDim / 16; ++ks) {
      uint32_t b[4];
      ldmatrix_x4(b, k_tile + swizzled<kHeadDim>(key_base + lane % 8 + (lane / 16) * 8, ks * 2 + (lane / 8) % 2));
      mma_16816(s[0], q_frag[ks], b[0], b[1]);
      mma_16816(s[1], q_frag[ks], b[2], b[3]);
    }
    float v_scale[2][2] = {{1.0f, 1.0f}, {1.0f, 1.0f}};
#pragma unroll
    for (int nb = 0; nb < 2; ++nb) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key_base + nb * 8 + 2 * quad_lane + (e & 1);
        float value = s[nb][e] * score_scale;
        if constexpr (!S::kKivi) value *= k_scales[key];
        s[nb][e] = tile_begin + key < end ? value : -INFINITY;
      }
      if constexpr (!S::kKivi) {
        v_scale[nb][0] = v_scales[key_base + nb * 8 + 2 * quad_lane];
        v_scale[nb][1] = v_scales[key_base + nb * 8 + 2 * quad_lane + 1];
      }
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float tile_max = fmaxf(fmaxf(s[0][2 * half], s[0][2 * half + 1]), fmaxf(s[1][2 * half], s[1][2 * half + 1]));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      // This warp's first keys are valid (it skipped otherwise), so the max is finite.
      const float new_max = fmaxf(row_max[half], tile_max);
      const float alpha = exp2f(row_max[half] - new_max);
      row_max[half] = new_max;
      float sum = 0.0f;
#pragma unroll
      for (int nb = 0; nb < 2; ++nb) {
        s[nb][2 * half] = exp2f(s[nb][2 * half] - new_max);
        s[nb][2 * half + 1] = exp2f(s[nb][2 * half + 1] - new_max);
        sum += s[nb][2 * half] + s[nb][2 * half + 1];
      }
      row_sum[half] = row_sum[half] * alpha + sum;
#pragma unroll
      for (int nb = 0; nb < kHeadDim / 8; ++nb) {
        o[nb][2 * half] *= alpha;
        o[nb][2 * half + 1] *= alpha;
      }
    }
    // O += P V (P carries the V scale of its key).
    const uint32_t a[4] = {pack_half2(s[0][0] * v_scale[0][0], s[0][1] * v_scale[0][1]),
                           pack_half2(s[0][2] * v_scale[0][0], s[0][3] * v_scale[0][1]),
                           pack_half2(s[1][0] * v_scale[1][0], s[1][1] * v_scale[1][1]),
                           pack_half2(s[1][2] * v_scale[1][0], s[1][3] * v_scale[1][1])};
#pragma unroll
    for (int dp = 0; dp < kHeadDim / 16; ++dp) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, v_tile + swizzled<kHeadDim>(key_base + lane % 8 + ((lane / 8) % 2) * 8, dp * 2 + lane / 16));
      mma_16816(o[2 * dp], a, b[0], b[1]);
      mma_16816(o[2 * dp + 1], a, b[2], b[3]);
    }
  }

  // Merge the warps: (max, sum) and O of each warp's rows through shared memory.
  __syncthreads();                                               // every warp is done with the tiles
  float* merge_o = reinterpret_cast<float*>(smem);               // [warp][row][head_dim]
  float* merge_stats = merge_o + kTcWarps * kTcRows * kHeadDim;  // [warp][row] (max, sum)
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float sum = row_sum[half];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int row = group_row + half * 8;
    if (quad_lane == 0) {
      merge_stats[2 * (warp * kTcRows + row)] = row_max[half];
      merge_stats[2 * (warp * kTcRows + row) + 1] = sum;
    }
#pragma unroll
    for (int nb = 0; nb < kHeadDim / 8; ++nb) {
      float* dst = merge_o + (warp * kTcRows + row) * kHeadDim + nb * 8 + 2 * quad_lane;
      dst[0] = o[nb][2 * half];
      dst[1] = o[nb][2 * half + 1];
    }
  }
  __syncthreads();
  for (int i = tid; i < rows * kHeadDim; i += kTcThreads) {
    const int row = i / kHeadDim;
    const int d = i % kHeadDim;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kTcWarps; ++w) m = fmaxf(m, merge_stats[2 * (w * kTcRows + row)]);
    float l = 0.0f, value = 0.0f;
#pragma unroll
    for (int w = 0; w < kTcWarps; ++w) {
      const float wm = merge_stats[2 * (w * kTcRows + row)];
      if (wm == -INFINITY) continue;  // a warp whose keys were all past the split
      const float weight = exp2f(wm - m);
      l = fmaf(merge_stats[2 * (w * kTcRows + row) + 1], weight, l);
      value = fmaf(merge_o[(w * kTcRows + row) * kHeadDim + d], weight, value);
    }
    const size_t slot = partial_index + static_cast<size_t>(row) * grid_splits;
    if (num_splits == 1) {
      args.out[(static_cast<size_t>(token) * args.num_heads + head0 + row) * kHeadDim + d] =
          float_to_bf16_bits(value / l);
    } else {
      partial_out[slot * kHeadDim + d] = value / l;
      if (d == 0) partial_stats[slot] = make_float2(m, l);
    }
  }
}

template <int kHeadDim, KvFormat kFormat>
void launch_tc_for_dim(const PagedAttentionArgs& args, DecodeSplitPolicy policy, int32_t grid_splits,
                       float* partial_out, float2* partial_stats, Stream stream) {
  using S = TcShape<kHeadDim, kFormat>;
  static const bool attribute_set = [] {
    cudaFuncSetAttribute(decode_tc_kernel<kHeadDim, kFormat>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(S::kSmemBytes));
    return true;
  }();
  (void)attribute_set;
  const int rows = largest_group_tile(args.num_heads / args.cache.num_kv_heads, kTcRows);
  const dim3 grid(grid_splits, args.num_heads / rows, args.num_seqs);
  decode_tc_kernel<kHeadDim, kFormat>
      <<<grid, kTcThreads, S::kSmemBytes, stream>>>(args, policy, grid_splits, rows, partial_out, partial_stats);
}

}  // namespace

template <KvFormat kFormat>
void launch_decode_tc(const PagedAttentionArgs& args, DecodeSplitPolicy policy, int32_t grid_splits, float* partial_out,
                      float2* partial_stats, Stream stream) {
  if (args.cache.head_dim == 64) {
    launch_tc_for_dim<64, kFormat>(args, policy, grid_splits, partial_out, partial_stats, stream);
  } else {
    launch_tc_for_dim<128, kFormat>(args, policy, grid_splits, partial_out, partial_stats, stream);
  }
}

template void launch_decode_tc<KvFormat::kFp8E4M3>(const PagedAttentionArgs&, DecodeSplitPolicy, int32_t, float*,
                                                   float2*, Stream);
template void launch_decode_tc<KvFormat::kInt8>(const PagedAttentionArgs&, DecodeSplitPolicy, int32_t, float*, float2*,
                                                Stream);
template void launch_decode_tc<KvFormat::kKivi4>(const PagedAttentionArgs&, DecodeSplitPolicy, int32_t, float*, float2*,
                                                 Stream);
template void launch_decode_tc<KvFormat::kKivi2>(const PagedAttentionArgs&, DecodeSplitPolicy, int32_t, float*, float2*,
                                                 Stream);

}  // namespace folio::cuda::decode
