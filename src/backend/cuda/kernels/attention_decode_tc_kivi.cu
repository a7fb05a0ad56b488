// Paged decode attention on tensor cores for the KIVI caches (kivi4, kivi2).
//
// The CUDA-core decode kernel (attention_decode_kernel.cuh) is bound by reading fp16 K/V; with
// a sixth of the bytes, KIVI makes it bound by its own arithmetic (unpacking, then kGroup FMAs
// per value and shuffles per key) instead. Here the query heads of a GQA group are the rows of
// an m16n8k16 MMA (attention_decode_tc_common.cuh), so the dot products and P.V cost a few MMAs
// per 16 keys and what is left is unpacking each value once.
//
// Grid: (grid_splits, num_heads / rows, num_seqs), as the CUDA-core kernel's, with up to 16
// query heads of one KV head per CTA (rows beyond the group are zero queries, computed and
// dropped). Splits are the same (attention_plan.h), so the output goes through the same reduce.
// Per 64-key tile, each of the 4 warps on its own 16 keys:
//   1. cp.async copies the next tile's raw bytes (the sealed groups, or the query's own block
//      as staged fp16 rows) into the other stage of the warp's raw ring;
//   2. the warp converts this tile's raw bytes into swizzled fp16 K and V tiles, codes as
//      code * s + m (a key channel's scale and minimum come with its group, so each value is
//      unpacked once into shared memory rather than into every fragment that reads it);
//   3. S = Q K^T by MMA, mask, online softmax in exp2, P rounded to fp16 in registers,
//      O += P V by MMA with V loaded by ldmatrix.trans.
// At the end the 4 warps' (max, sum, O) are merged through shared memory and the CTA writes
// bf16 output (one split) or a normalized partial and its (max, sum).
#include <cassert>
#include <cmath>

#include "backend/cuda/kernels/attention_decode_launch.h"
#include "backend/cuda/kernels/attention_decode_tc_common.cuh"
#include "backend/cuda/kernels/attention_prefill_common.cuh"
#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/kernels/kivi.cuh"
#include "backend/cuda/programmatic_launch.cuh"

namespace folio::cuda::decode {
namespace {

using namespace detail;
using namespace tc;
using prefill::swizzled;

// KIVI's group geometry (kv_format.h), instantiated for the KIVI formats only.
template <int kHeadDim, int kBits>
struct KiviGeometry {
  static constexpr int kChannelBytes = kKiviGroup * kBits / 8;  // a key channel's 32 codes
  static constexpr int kHalfChannelBytes = kChannelBytes / 2;   // its 16 codes of one warp's keys
  static constexpr int kValueRowBytes = kHeadDim * kBits / 8 + kHeadDim / kKiviGroup * 4;
};

// One online-softmax step on this warp's scores s (16 rows x 16 keys, already scaled to log2
// units and masked with -inf; the step's first key is valid, so each row's max is finite):
// s becomes P = 2^(s - max), the running (max, sum) advance, and O is rescaled.
template <int kHeadDim>
__device__ __forceinline__ void online_softmax_step(float (&s)[2][4], float (&row_max)[2], float (&row_sum)[2],
                                                    float (&o)[kHeadDim / 8][4]) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float tile_max = fmaxf(fmaxf(s[0][2 * half], s[0][2 * half + 1]), fmaxf(s[1][2 * half], s[1][2 * half + 1]));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
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
}

template <int kHeadDim, KvFormat kFormat>
struct TcShape {
  static constexpr int kChunks = kHeadDim / 8;  // 16-byte fp16 chunks per row
  static constexpr int kWarpTileHalfs = kWarpKeys * kHeadDim;
  // One warp's raw K (or V) for its 16 keys: staged fp16 rows, the larger of its two cases
  // (sealed groups are smaller).
  static constexpr int kRawBytes = kWarpKeys * kHeadDim * 2;
  // Per warp: 2 stages x (K, V) raw, then the fp16 K and V tiles.
  static constexpr size_t kWarpTilesOffset = 4ull * kRawBytes;
  static constexpr size_t kWarpBytes = kWarpTilesOffset + 2ull * kWarpTileHalfs * 2;
  static constexpr size_t kQBytes = kRows * kHeadDim * 2;
  static constexpr size_t kMainBytes = kQBytes + kWarps * kWarpBytes;
  static constexpr size_t kSmemBytes = kMainBytes > kMergeBytes<kHeadDim> ? kMainBytes : kMergeBytes<kHeadDim>;
};

template <int kHeadDim, KvFormat kFormat>
__global__ void __launch_bounds__(kThreads)
    decode_tc_kernel(const PagedAttentionArgs args, DecodeSplitPolicy policy, int32_t grid_splits, int32_t rows,
                     float* partial_out, float2* partial_stats) {
  let_next_kernel_start();  // the output projection after it prefetches its weights meanwhile
  using S = TcShape<kHeadDim, kFormat>;
  extern __shared__ __align__(128) unsigned char smem[];
  uint16_t* q_smem = reinterpret_cast<uint16_t*>(smem);

  const int split = blockIdx.x;
  const int head0 = blockIdx.y * rows;
  const int seq = blockIdx.z;
  const KvLayerView& cache = args.cache;
  const int group_size = args.num_heads / cache.num_kv_heads;
  const int kv_head = head0 / group_size;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int quad_lane = lane % 4;
  // This warp's slice of shared memory: it loads, converts and attends to its own keys, so the
  // tile loop needs no CTA-wide barrier.
  unsigned char* warp_smem = smem + S::kQBytes + warp * S::kWarpBytes;
  uint16_t* k_tile = reinterpret_cast<uint16_t*>(warp_smem + S::kWarpTilesOffset);
  uint16_t* v_tile = k_tile + S::kWarpTileHalfs;

  const int token = args.cu_query_starts[seq];
  if (args.cu_query_starts[seq + 1] - token != 1) return;  // a prefill row: not ours
  const int context_len = args.context_lens[seq];
  const int split_tokens = decode_split_tokens(context_len, policy);
  const int num_splits = (context_len + split_tokens - 1) / split_tokens;
  const int begin = split * split_tokens;
  if (begin >= context_len) return;
  const int end = min(context_len, begin + split_tokens);
  const int32_t* block_table = args.block_tables + static_cast<size_t>(seq) * args.max_blocks_per_seq;
  const BlockIndexer indexer(cache.block_size);
  // The query's own block is staged in fp16.
  const int own_start = (context_len - 1) / cache.block_size * cache.block_size;
  const int own_slot = args.slot_mapping[token];
  const int own_staging = own_slot >= 0 ? own_slot / cache.block_size : 0;
  // The warp's keys are [key0(j), key0(j) + 16) of tile j, while key0 < end.
  const int warp_begin = begin + warp * kWarpKeys;
  const int num_steps = warp_begin < end ? (end - warp_begin + kTile - 1) / kTile : 0;

  // Q: rows [0, rows) are the CTA's heads, the rest zero.
  for (int c = tid; c < kRows * S::kChunks; c += kThreads) {
    const int row = c / S::kChunks;
    const int chunk = c % S::kChunks;
    const bool valid = row < rows;
    const uint16_t* src = args.q;
    if (valid) src += (static_cast<size_t>(token) * args.num_heads + head0 + row) * kHeadDim + chunk * 8;
    cp_async_16(q_smem + swizzled<kHeadDim>(row, chunk), src, valid);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  uint32_t q_frag[kHeadDim / 16][4];
#pragma unroll
  for (int ks = 0; ks < kHeadDim / 16; ++ks) {
    ldmatrix_x4(q_frag[ks], q_smem + swizzled<kHeadDim>(lane % 16, ks * 2 + lane / 16));
  }

  auto load_raw = [&](int step, int stage) {
    unsigned char* k_dst = warp_smem + stage * 2 * S::kRawBytes;
    unsigned char* v_dst = k_dst + S::kRawBytes;
    const int key0 = warp_begin + step * kTile;
    using G = KiviGeometry<kHeadDim, kivi_bits(kFormat)>;
    if (key0 >= own_start) {  // staged fp16 rows
      for (int i = lane; i < kWarpKeys * S::kChunks; i += 32) {
        const int row = i / S::kChunks;
        const int chunk = i % S::kChunks;
        const int pos = key0 + row;
        const bool valid = pos < end;
        const int in_block = valid ? indexer.offset(pos) : 0;
        const int dst = (row * kHeadDim + chunk * 8) * 2;
        cp_async_16(k_dst + dst, cache.staging_row(0, own_staging, in_block, kv_head) + chunk * 8, valid);
        cp_async_16(v_dst + dst, cache.staging_row(1, own_staging, in_block, kv_head) + chunk * 8, valid);
      }
    } else {  // sealed: this half of a key group (codes, then the group's scales and minima), 16 value rows
      const int block = block_table[indexer.block(key0)];
      const int in_block = indexer.offset(key0);
      const uint8_t* group = cache.k + cache.kivi_key_group_offset(block, kv_head, in_block / kKiviGroup);
      const int half = (in_block % kKiviGroup) / kWarpKeys;
      for (int c = lane; c < kHeadDim; c += 32) {
        const uint8_t* src = group + c * G::kChannelBytes + half * G::kHalfChannelBytes;
        if constexpr (G::kHalfChannelBytes == 8) {
          cp_async_8(k_dst + c * 8, src, true);
        } else {
          cp_async_4(k_dst + c * 4, src, true);
        }
      }
      for (int i = lane; i < kHeadDim * 4 / 16; i += 32) {
        cp_async_16(k_dst + kHeadDim * G::kHalfChannelBytes + 16 * i, group + kHeadDim * G::kChannelBytes + 16 * i,
                    true);
      }
      constexpr int kRowWords = G::kValueRowBytes / 8;
      for (int i = lane; i < kWarpKeys * kRowWords; i += 32) {
        const int row = i / kRowWords;
        const int word = i % kRowWords;
        const uint8_t* src = cache.v + cache.kivi_value_row_offset(block, in_block + row, kv_head) + 8 * word;
        cp_async_8(v_dst + row * G::kValueRowBytes + 8 * word, src, true);
      }
    }
  };

  // This warp's raw keys -> its fp16 K and V tiles (swizzled rows, as the prefill kernels keep
  // them): codes as code * s + m, staged rows as they are.
  auto convert = [&](int step, int stage) {
    const unsigned char* k_raw = warp_smem + stage * 2 * S::kRawBytes;
    const unsigned char* v_raw = k_raw + S::kRawBytes;
    const int key0 = warp_begin + step * kTile;
    using G = KiviGeometry<kHeadDim, kivi_bits(kFormat)>;
    constexpr int kBits = kivi_bits(kFormat);
    if (key0 >= own_start) {
      for (int i = lane; i < kWarpKeys * S::kChunks; i += 32) {
        const int dst = swizzled<kHeadDim>(i / S::kChunks, i % S::kChunks);
        *reinterpret_cast<uint4*>(k_tile + dst) = reinterpret_cast<const uint4*>(k_raw)[i];
        *reinterpret_cast<uint4*>(v_tile + dst) = reinterpret_cast<const uint4*>(v_raw)[i];
      }
      return;
    }
    const unsigned char* scales = k_raw + kHeadDim * G::kHalfChannelBytes;
    for (int c = lane; c < kHeadDim; c += 32) {  // keys: a lane per channel, its 16 codes one word run
      uint32_t words[G::kHalfChannelBytes / 4];
#pragma unroll
      for (int w = 0; w < G::kHalfChannelBytes / 4; ++w) {
        words[w] = reinterpret_cast<const uint32_t*>(k_raw + c * G::kHalfChannelBytes)[w];
      }
      const float scale = half_at(scales + 2 * c);
      const float minimum = half_at(scales + 2 * kHeadDim + 2 * c);
#pragma unroll
      for (int t = 0; t < kWarpKeys; ++t) {
        const int bit = t * kBits;
        const int code = (words[bit / 32] >> (bit % 32)) & ((1 << kBits) - 1);
        k_tile[swizzled<kHeadDim>(t, c / 8) + c % 8] = float_to_half_bits(static_cast<float>(code) * scale + minimum);
      }
    }
    for (int i = lane; i < kWarpKeys * S::kChunks; i += 32) {  // values: 8 dims of one row a unit
      const int row = i / S::kChunks;
      const int chunk = i % S::kChunks;
      const unsigned char* raw = v_raw + row * G::kValueRowBytes;
      const uint32_t codes = kBits == 2 ? *reinterpret_cast<const uint16_t*>(raw + chunk * 2)
                                        : *reinterpret_cast<const uint32_t*>(raw + chunk * 4);
      const int g = chunk * 8 / kKiviGroup;
      const float scale = half_at(raw + kHeadDim * kBits / 8 + 2 * g);
      const float minimum = half_at(raw + kHeadDim * kBits / 8 + kHeadDim / kKiviGroup * 2 + 2 * g);
      float x[8];
#pragma unroll
      for (int j = 0; j < 8; ++j)
        x[j] = static_cast<float>((codes >> (j * kBits)) & ((1 << kBits) - 1)) * scale + minimum;
      *reinterpret_cast<uint4*>(v_tile + swizzled<kHeadDim>(row, chunk)) =
          make_uint4(pack_half2(x[0], x[1]), pack_half2(x[2], x[3]), pack_half2(x[4], x[5]), pack_half2(x[6], x[7]));
    }
  };

  float o[kHeadDim / 8][4];
#pragma unroll
  for (int nb = 0; nb < kHeadDim / 8; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[nb][e] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f};  // this thread's share; the quad is summed at the end
  const float score_scale = args.scale * kLog2e;

  if (num_steps > 0) load_raw(0, 0);
  cp_async_commit();
  for (int j = 0; j < num_steps; ++j) {
    const int stage = j & 1;
    if (j + 1 < num_steps) {
      load_raw(j + 1, stage ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncwarp();  // the warp's copies of step j are in; its math on step j - 1 is done
    convert(j, stage);
    __syncwarp();
    const int key0 = warp_begin + j * kTile;

    // S = Q K^T for 16 rows x this warp's 16 keys.
    float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int ks = 0; ks < kHeadDim / 16; ++ks) {
      uint32_t b[4];
      ldmatrix_x4(b, k_tile + swizzled<kHeadDim>(lane % 8 + (lane / 16) * 8, ks * 2 + (lane / 8) % 2));
      mma_16816(s[0], q_frag[ks], b[0], b[1]);
      mma_16816(s[1], q_frag[ks], b[2], b[3]);
    }
#pragma unroll
    for (int nb = 0; nb < 2; ++nb) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = nb * 8 + 2 * quad_lane + (e & 1);
        s[nb][e] = key0 + key < end ? s[nb][e] * score_scale : -INFINITY;
      }
    }
    online_softmax_step<kHeadDim>(s, row_max, row_sum, o);
    // O += P V.
    const uint32_t a[4] = {pack_half2(s[0][0], s[0][1]), pack_half2(s[0][2], s[0][3]), pack_half2(s[1][0], s[1][1]),
                           pack_half2(s[1][2], s[1][3])};
#pragma unroll
    for (int dp = 0; dp < kHeadDim / 16; ++dp) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, v_tile + swizzled<kHeadDim>(lane % 8 + ((lane / 8) % 2) * 8, dp * 2 + lane / 16));
      mma_16816(o[2 * dp], a, b[0], b[1]);
      mma_16816(o[2 * dp + 1], a, b[2], b[3]);
    }
  }

  DecodeOutput out;
  out.token = token;
  out.head0 = head0;
  out.rows = rows;
  out.num_splits = num_splits;
  out.grid_splits = grid_splits;
  out.partial_index = (static_cast<size_t>(seq) * args.num_heads + head0) * grid_splits + split;
  __syncthreads();  // every warp is done with its slice
  float* merge_o = merge_values<kHeadDim>(smem);
  float2* stats = merge_stats<kHeadDim>(smem);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float sum = row_sum[half];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int row = lane / 4 + half * 8;
    if (quad_lane == 0) stats[warp * kRows + row] = make_float2(row_max[half], sum);
#pragma unroll
    for (int nb = 0; nb < kHeadDim / 8; ++nb) {
      float* dst = merge_o + (warp * kRows + row) * kHeadDim + nb * 8 + 2 * quad_lane;
      dst[0] = o[nb][2 * half];
      dst[1] = o[nb][2 * half + 1];
    }
  }
  __syncthreads();
  finish_merge<kHeadDim>(smem, args, out, partial_out, partial_stats);
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
  const int rows = largest_group_tile(args.num_heads / args.cache.num_kv_heads, kRows);
  const dim3 grid(grid_splits, args.num_heads / rows, args.num_seqs);
  decode_tc_kernel<kHeadDim, kFormat>
      <<<grid, kThreads, S::kSmemBytes, stream>>>(args, policy, grid_splits, rows, partial_out, partial_stats);
}

}  // namespace

template <KvFormat kFormat>
void launch_decode_tc_kivi(const PagedAttentionArgs& args, DecodeSplitPolicy policy, int32_t grid_splits,
                           float* partial_out, float2* partial_stats, Stream stream) {
  if (args.cache.head_dim == 64) {
    launch_tc_for_dim<64, kFormat>(args, policy, grid_splits, partial_out, partial_stats, stream);
  } else {
    launch_tc_for_dim<128, kFormat>(args, policy, grid_splits, partial_out, partial_stats, stream);
  }
}

template void launch_decode_tc_kivi<KvFormat::kKivi4>(const PagedAttentionArgs&, DecodeSplitPolicy, int32_t, float*,
                                                      float2*, Stream);
template void launch_decode_tc_kivi<KvFormat::kKivi2>(const PagedAttentionArgs&, DecodeSplitPolicy, int32_t, float*,
                                                      float2*, Stream);

}  // namespace folio::cuda::decode
