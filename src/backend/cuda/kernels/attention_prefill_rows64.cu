// Varlen paged prefill attention, FlashAttention-2's algorithm on tensor cores.
//
// Grid: (query tiles, num_heads, num_seqs); the query-tile index runs backwards so that the
// tiles with the most causal work start first. A CTA of 4 warps takes 64 query rows of one
// (sequence, head); warp w owns rows 16w..16w+15 and keeps their Q fragments, their output
// accumulators (fp32) and their running max/sum in registers for the whole kernel. With
// PrefillRows::kMultiTokenOnly the CTAs of query_len == 1 sequences exit at once (the
// dispatcher sends those rows to the decode kernel, so they round the same in every batch).
//
// K/V tiles of 64 tokens are gathered through the block table with cp.async into a
// double-buffered shared-memory ring (the copy of tile j+1 overlaps the math of tile j). Rows
// are stored with an XOR swizzle (16-byte chunk c of row r lives at chunk c ^ (r % 8)), so the
// eight row addresses of every ldmatrix phase hit eight different 16-byte bank groups.
//
// Per tile: S = Q K^T with mma.sync m16n8k16 (K rows are the "col" B operand as stored),
// scale and causal mask (query row i of the tile sits at position pos0 + i and sees keys
// <= its position; keys >= context_len are masked too), online softmax in exp2, P rounded to
// fp16 in registers (the S accumulator layout is the A-operand layout), O += P V with V loaded
// by ldmatrix.trans. Tiles entirely above the diagonal are never visited: the loop stops at
// the last key the tile's last row can see.
//
// Quantized caches (fp8, int8: kFormat) use this kernel whatever kernel is asked for: each
// thread loads 8 one-byte values and their row's scale, dequantizes them in registers and
// stores the 8 fp16 into the swizzled tile, so the math is the fp16 kernel's and only the
// tile in shared memory ever holds dequantized values. (The loads are synchronous rather than
#include <cassert>
#include <cmath>

#include "backend/cuda/kernels/attention_prefill_common.cuh"
#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/kernels/kernels.h"
#include "backend/cuda/kernels/kivi.cuh"
#include "backend/cuda/kernels/kv_quant.cuh"

namespace folio::cuda::prefill {
namespace {

using namespace detail;

constexpr int kBlockM = 64;
constexpr int kPrefillThreads = 128;

template <int kHeadDim>
struct PrefillShape {
  static constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
  static constexpr int kQHalfs = kBlockM * kHeadDim;
  static constexpr int kKvHalfs = kBlockN * kHeadDim;
  static constexpr size_t kSmemBytes = (kQHalfs + 4ull * kKvHalfs) * sizeof(uint16_t);
};

// KIVI: 8 dims (chunk) of the key and the value of one token of a sealed block, dequantized to
// fp16. Keys are stored per channel over 32 tokens, so the 8 codes come from 8 channel runs.
template <int kHeadDim, int kBits>
__device__ __forceinline__ void kivi_dequantize8(const KvLayerView& cache, int block, int in_block, int kv_head,
                                                 int chunk, uint4& k_half8, uint4& v_half8) {
  constexpr int kChannelBytes = kKiviGroup * kBits / 8;
  const uint8_t* group = cache.k + cache.kivi_key_group_offset(block, kv_head, in_block / kKiviGroup);
  const uint8_t* scales = group + kHeadDim * kChannelBytes + chunk * 16;
  const uint8_t* minima = scales + 2 * kHeadDim;
  float k[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int code = kivi_code<kBits>(group + (chunk * 8 + j) * kChannelBytes, in_block % kKiviGroup);
    k[j] = static_cast<float>(code) * half_at(scales + 2 * j) + half_at(minima + 2 * j);
  }
  const uint8_t* row = cache.v + cache.kivi_value_row_offset(block, in_block, kv_head);
  const uint32_t codes = kBits == 2 ? *reinterpret_cast<const uint16_t*>(row + chunk * 2)
                                    : *reinterpret_cast<const uint32_t*>(row + chunk * 4);
  const uint8_t* row_scales = row + kHeadDim * kBits / 8 + 2 * (chunk * 8 / kKiviGroup);
  const float scale = half_at(row_scales);
  const float minimum = half_at(row_scales + 2 * (kHeadDim / kKiviGroup));
  float v[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = static_cast<float>((codes >> (j * kBits)) & ((1 << kBits) - 1)) * scale + minimum;
  k_half8 = make_uint4(pack_half2(k[0], k[1]), pack_half2(k[2], k[3]), pack_half2(k[4], k[5]), pack_half2(k[6], k[7]));
  v_half8 = make_uint4(pack_half2(v[0], v[1]), pack_half2(v[2], v[3]), pack_half2(v[4], v[5]), pack_half2(v[6], v[7]));
}

// fp8 / int8: 8 dims (chunk) of the key and the value of one token, dequantized to fp16.
template <KvFormat kFormat>
__device__ __forceinline__ void scaled_dequantize8(const KvLayerView& cache, int block, int in_block, int kv_head,
                                                   int chunk, uint4& k_half8, uint4& v_half8) {
  const size_t values = cache.value_offset(block, in_block, kv_head) + chunk * 8;
  const size_t scale = cache.scale_offset(block, in_block, kv_head);
  float k[8], v[8];
  kv_unpack8(kFormat, *reinterpret_cast<const uint2*>(cache.k + values), k);
  kv_unpack8(kFormat, *reinterpret_cast<const uint2*>(cache.v + values), v);
  const float k_scale = *reinterpret_cast<const float*>(cache.k + scale);
  const float v_scale = *reinterpret_cast<const float*>(cache.v + scale);
  k_half8 = make_uint4(pack_half2(k[0] * k_scale, k[1] * k_scale), pack_half2(k[2] * k_scale, k[3] * k_scale),
                       pack_half2(k[4] * k_scale, k[5] * k_scale), pack_half2(k[6] * k_scale, k[7] * k_scale));
  v_half8 = make_uint4(pack_half2(v[0] * v_scale, v[1] * v_scale), pack_half2(v[2] * v_scale, v[3] * v_scale),
                       pack_half2(v[4] * v_scale, v[5] * v_scale), pack_half2(v[6] * v_scale, v[7] * v_scale));
}

template <int kHeadDim, KvFormat kFormat = KvFormat::kFp16>
__global__ void __launch_bounds__(kPrefillThreads)
    prefill_kernel(const PagedAttentionArgs args, bool skip_single_query) {
  using S = PrefillShape<kHeadDim>;
  extern __shared__ __align__(128) unsigned char smem[];
  uint16_t* q_smem = reinterpret_cast<uint16_t*>(smem);
  uint16_t* kv_smem = q_smem + S::kQHalfs;  // [stage][K|V][kBlockN][kHeadDim], swizzled

  const int tile = gridDim.x - 1 - blockIdx.x;
  const int head = blockIdx.y;
  const int seq = blockIdx.z;
  const int query_start = args.cu_query_starts[seq];
  const int query_len = args.cu_query_starts[seq + 1] - query_start;
  const int m0 = tile * kBlockM;
  if (m0 >= query_len || (skip_single_query && query_len == 1)) return;

  const KvLayerView& cache = args.cache;
  const int context_len = args.context_lens[seq];
  const int pos0 = context_len - query_len + m0;  // position of the tile's first row
  const int kv_head = head / (args.num_heads / cache.num_kv_heads);
  const int kv_end = min(context_len, pos0 + kBlockM);  // keys the last row can see
  const int num_tiles = (kv_end + kBlockN - 1) / kBlockN;
  // Residual formats (KIVI, fp8): a row sees the blocks before its own sealed and its own block
  // in fp16 from that block's staging block. The CTA's rows lie in blocks [qb_min, qb_max], so a tile of keys in
  // that range is read twice: once sealed (pass 0, rows of later blocks see it) and once staged
  // (pass 1, the rows of its own block see it); tiles wholly before qb_min are read sealed
  // only, tiles wholly in qb_max staged only. The steps are the pass-0 tiles [0, sealed_tiles)
  // then the pass-1 tiles [staged_first, num_tiles); a row's state is untouched by a step that
  // masks all its keys, so each row's result depends on its own position alone.
  constexpr bool kResidual = kv_format_has_residual(kFormat);
  int qb_min = 0, qb_max = 0, sealed_tiles = num_tiles, staged_first = num_tiles;
  if constexpr (kResidual) {
    qb_min = pos0 / cache.block_size;
    qb_max = (kv_end - 1) / cache.block_size;
    sealed_tiles = min(num_tiles, (qb_max * cache.block_size + kBlockN - 1) / kBlockN);
    staged_first = qb_min * cache.block_size / kBlockN;
  }
  const int num_steps = sealed_tiles + (num_tiles - staged_first);
  auto step_tile = [&](int step) { return step < sealed_tiles ? step : staged_first + step - sealed_tiles; };
  const int32_t* block_table = args.block_tables + static_cast<size_t>(seq) * args.max_blocks_per_seq;
  const size_t token_stride = static_cast<size_t>(cache.num_kv_heads) * kHeadDim;
  const BlockIndexer indexer(cache.block_size);

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int group_row = lane / 4;  // row within the 8-row half of the mma fragment
  const int quad_lane = lane % 4;

  // Q tile (rows past the sequence's query_len are zero-filled and never written back).
#pragma unroll
  for (int i = 0; i < S::kQHalfs / 8 / kPrefillThreads; ++i) {
    const int c = tid + i * kPrefillThreads;
    const int row = c / S::kChunks;
    const int chunk = c % S::kChunks;
    const bool valid = m0 + row < query_len;
    const uint16_t* src = args.q;
    if (valid) {
      src += (static_cast<size_t>(query_start + m0 + row) * args.num_heads + head) * kHeadDim + chunk * 8;
    }
    cp_async_16(q_smem + swizzled<kHeadDim>(row, chunk), src, valid);
  }

  auto load_kv = [&](int step, int stage) {
    const int kv_tile = step_tile(step);
    uint16_t* k_dst = kv_smem + stage * 2 * S::kKvHalfs;
    uint16_t* v_dst = k_dst + S::kKvHalfs;
    if constexpr (kResidual) {
      const bool staged_pass = step >= sealed_tiles;
#pragma unroll
      for (int i = 0; i < S::kKvHalfs / 8 / kPrefillThreads; ++i) {
        const int c = tid + i * kPrefillThreads;
        const int row = c / S::kChunks;
        const int chunk = c % S::kChunks;
        const int key = kv_tile * kBlockN + row;
        const int key_block = indexer.block(key);
        uint4 k_half8 = make_uint4(0, 0, 0, 0), v_half8 = k_half8;  // keys no row of this pass sees
        if (key < kv_end && staged_pass && key_block >= qb_min) {
          // The staging block of key_block: the one its first row in this chunk wrote to.
          const int row_in_block = max(0, key_block * cache.block_size - pos0);
          const int staging = args.slot_mapping[query_start + m0 + row_in_block] / cache.block_size;
          const int in_block = indexer.offset(key);
          k_half8 = *reinterpret_cast<const uint4*>(cache.staging_row(0, staging, in_block, kv_head) + chunk * 8);
          v_half8 = *reinterpret_cast<const uint4*>(cache.staging_row(1, staging, in_block, kv_head) + chunk * 8);
        } else if (key < kv_end && !staged_pass && key_block < qb_max) {
          if constexpr (kv_format_is_kivi(kFormat)) {
            kivi_dequantize8<kHeadDim, kivi_bits(kFormat)>(cache, block_table[key_block], indexer.offset(key), kv_head,
                                                           chunk, k_half8, v_half8);
          } else {
            scaled_dequantize8<kFormat>(cache, block_table[key_block], indexer.offset(key), kv_head, chunk, k_half8,
                                        v_half8);
          }
        }
        const int dst = swizzled<kHeadDim>(row, chunk);
        *reinterpret_cast<uint4*>(k_dst + dst) = k_half8;
        *reinterpret_cast<uint4*>(v_dst + dst) = v_half8;
      }
    } else {
#pragma unroll
      for (int i = 0; i < S::kKvHalfs / 8 / kPrefillThreads; ++i) {
        const int c = tid + i * kPrefillThreads;
        const int row = c / S::kChunks;
        const int chunk = c % S::kChunks;
        const int key = kv_tile * kBlockN + row;
        const bool valid = key < kv_end;
        size_t offset = 0;
        if (valid && kv_format_is_16bit(kFormat)) {
          const int block = block_table[indexer.block(key)];
          const size_t slot = static_cast<size_t>(block) * cache.block_size + indexer.offset(key);
          offset = slot * token_stride + static_cast<size_t>(kv_head) * kHeadDim + chunk * 8;
        }
        const int dst = swizzled<kHeadDim>(row, chunk);
        if constexpr (kFormat == KvFormat::kBf16) {
          // bf16 -> fp16 for the fp16 MMA: exact within fp16's range (fp16 has 3 more mantissa
          // bits); magnitudes past fp16's largest clamp to +-65504 instead of becoming inf.
          uint4 k_half8 = make_uint4(0, 0, 0, 0), v_half8 = k_half8;
          if (valid) {
            float k[8], v[8];
            unpack_bf16x8(*reinterpret_cast<const uint4*>(cache.fp16_keys() + offset), k);
            unpack_bf16x8(*reinterpret_cast<const uint4*>(cache.fp16_values() + offset), v);
            for (int e = 0; e < 8; ++e) {
              k[e] = fminf(fmaxf(k[e], -65504.0f), 65504.0f);
              v[e] = fminf(fmaxf(v[e], -65504.0f), 65504.0f);
            }
            k_half8 = make_uint4(pack_half2(k[0], k[1]), pack_half2(k[2], k[3]), pack_half2(k[4], k[5]),
                                 pack_half2(k[6], k[7]));
            v_half8 = make_uint4(pack_half2(v[0], v[1]), pack_half2(v[2], v[3]), pack_half2(v[4], v[5]),
                                 pack_half2(v[6], v[7]));
          }
          *reinterpret_cast<uint4*>(k_dst + dst) = k_half8;
          *reinterpret_cast<uint4*>(v_dst + dst) = v_half8;
        } else if constexpr (kFormat != KvFormat::kFp16) {
          uint4 k_half8 = make_uint4(0, 0, 0, 0), v_half8 = k_half8;
          if (valid) {
            scaled_dequantize8<kFormat>(cache, block_table[indexer.block(key)], indexer.offset(key), kv_head, chunk,
                                        k_half8, v_half8);
          }
          *reinterpret_cast<uint4*>(k_dst + dst) = k_half8;
          *reinterpret_cast<uint4*>(v_dst + dst) = v_half8;
        } else {
          cp_async_16(k_dst + dst, cache.fp16_keys() + offset, valid);
          cp_async_16(v_dst + dst, cache.fp16_values() + offset, valid);
        }
      }
    }
  };

  load_kv(0, 0);
  cp_async_commit();  // group 0: Q and the first K/V tile

  uint32_t q_frag[kHeadDim / 16][4];
  float o[kHeadDim / 8][4];
#pragma unroll
  for (int nb = 0; nb < kHeadDim / 8; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[nb][e] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f};  // this thread's share; the quad is summed at the end
  const float score_scale = args.scale * kLog2e;
  const int row_lo = warp * 16 + group_row;  // this thread's rows: row_lo and row_lo + 8

  for (int j = 0; j < num_steps; ++j) {
    const int stage = j & 1;
    if (j + 1 < num_steps) {
      load_kv(j + 1, stage ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (j == 0) {
#pragma unroll
      for (int ks = 0; ks < kHeadDim / 16; ++ks) {
        ldmatrix_x4(q_frag[ks], q_smem + swizzled<kHeadDim>(warp * 16 + lane % 16, ks * 2 + lane / 16));
      }
    }
    const uint16_t* k_tile = kv_smem + stage * 2 * S::kKvHalfs;
    const uint16_t* v_tile = k_tile + S::kKvHalfs;

    // S = Q K^T for this warp's 16 rows x 64 keys.
    float s[kBlockN / 8][4];
#pragma unroll
    for (int nb = 0; nb < kBlockN / 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nb][e] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < kHeadDim / 16; ++ks) {
#pragma unroll
      for (int p = 0; p < kBlockN / 16; ++p) {
        uint32_t b[4];
        ldmatrix_x4(b, k_tile + swizzled<kHeadDim>(16 * p + lane % 8 + (lane / 16) * 8, ks * 2 + (lane / 8) % 2));
        mma_16816(s[2 * p], q_frag[ks], b[0], b[1]);
        mma_16816(s[2 * p + 1], q_frag[ks], b[2], b[3]);
      }
    }

    // Scale, mask, online softmax.
    const int key0 = step_tile(j) * kBlockN;
    const bool staged_pass = j >= sealed_tiles;
    const bool needs_mask = kResidual || key0 + kBlockN - 1 > pos0;
#pragma unroll
    for (int nb = 0; nb < kBlockN / 8; ++nb) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float value = s[nb][e] * score_scale;
        if (needs_mask) {
          const int key = key0 + nb * 8 + 2 * quad_lane + (e & 1);
          const int position = pos0 + row_lo + (e >= 2 ? 8 : 0);
          if (key > position || key >= context_len) value = -INFINITY;
          if constexpr (kResidual) {
            const bool own_block = indexer.block(key) == indexer.block(position);
            if (own_block != staged_pass) value = -INFINITY;
          }
        }
        s[nb][e] = value;
      }
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int nb = 0; nb < kBlockN / 8; ++nb) {
        tile_max = fmaxf(tile_max, fmaxf(s[nb][2 * half], s[nb][2 * half + 1]));
      }
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      // Finite: key 0 is visible to every row in tile 0, and row_max carries it afterwards. Not
      // so with the residual formats' passes (a row of block 0 sees nothing sealed): there a max
      // still at -inf exponentiates against 0, which leaves the row's state at zero.
      float new_max = fmaxf(row_max[half], tile_max);
      if constexpr (kResidual) new_max = new_max == -INFINITY ? 0.0f : new_max;
      const float alpha = exp2f(row_max[half] - new_max);
      row_max[half] = kResidual && tile_max == -INFINITY && row_max[half] == -INFINITY ? -INFINITY : new_max;
      float sum = 0.0f;
#pragma unroll
      for (int nb = 0; nb < kBlockN / 8; ++nb) {
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

    // O += P V.
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      const uint32_t a[4] = {pack_half2(s[2 * kk][0], s[2 * kk][1]), pack_half2(s[2 * kk][2], s[2 * kk][3]),
                             pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < kHeadDim / 16; ++dp) {
        uint32_t b[4];
        ldmatrix_x4_trans(b,
                          v_tile + swizzled<kHeadDim>(16 * kk + lane % 8 + ((lane / 8) % 2) * 8, dp * 2 + lane / 16));
        mma_16816(o[2 * dp], a, b[0], b[1]);
        mma_16816(o[2 * dp + 1], a, b[2], b[3]);
      }
    }
    __syncthreads();  // the next iteration's copy overwrites this stage
  }

#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float sum = row_sum[half];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = 1.0f / sum;
    const int row = row_lo + half * 8;
    if (m0 + row >= query_len) continue;
    uint16_t* dst = args.out + (static_cast<size_t>(query_start + m0 + row) * args.num_heads + head) * kHeadDim;
#pragma unroll
    for (int nb = 0; nb < kHeadDim / 8; ++nb) {
      *reinterpret_cast<uint32_t*>(dst + nb * 8 + 2 * quad_lane) =
          pack_bf162(o[nb][2 * half] * inv, o[nb][2 * half + 1] * inv);
    }
  }
}

template <int kHeadDim, KvFormat kFormat = KvFormat::kFp16>
void launch_prefill(const PagedAttentionArgs& args, bool skip_single_query, Stream stream) {
  using S = PrefillShape<kHeadDim>;
  static const bool attribute_set = [] {
    cudaFuncSetAttribute(prefill_kernel<kHeadDim, kFormat>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(S::kSmemBytes));
    return true;
  }();
  (void)attribute_set;
  const dim3 grid((args.max_query_len + kBlockM - 1) / kBlockM, args.num_heads, args.num_seqs);
  prefill_kernel<kHeadDim, kFormat><<<grid, kPrefillThreads, S::kSmemBytes, stream>>>(args, skip_single_query);
}

template <KvFormat kFormat>
void launch_prefill_quantized(const PagedAttentionArgs& args, bool skip_single_query, Stream stream) {
  if (args.cache.head_dim == 64) {
    launch_prefill<64, kFormat>(args, skip_single_query, stream);
  } else {
    launch_prefill<128, kFormat>(args, skip_single_query, stream);
  }
}

}  // namespace

void launch_prefill_rows64(const PagedAttentionArgs& args, bool skip_single_query, Stream stream) {
  switch (args.cache.format) {
    case KvFormat::kFp16: return launch_prefill_quantized<KvFormat::kFp16>(args, skip_single_query, stream);
    case KvFormat::kBf16: return launch_prefill_quantized<KvFormat::kBf16>(args, skip_single_query, stream);
    case KvFormat::kFp8E4M3: return launch_prefill_quantized<KvFormat::kFp8E4M3>(args, skip_single_query, stream);
    case KvFormat::kInt8: return launch_prefill_quantized<KvFormat::kInt8>(args, skip_single_query, stream);
    case KvFormat::kKivi4: return launch_prefill_quantized<KvFormat::kKivi4>(args, skip_single_query, stream);
    case KvFormat::kKivi2: return launch_prefill_quantized<KvFormat::kKivi2>(args, skip_single_query, stream);
  }
}

}  // namespace folio::cuda::prefill
