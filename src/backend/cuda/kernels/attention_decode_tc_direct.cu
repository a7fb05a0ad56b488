// Paged decode attention on tensor cores for the caches whose values are single numbers: fp8
// and int8 (one byte and a per-(token, head) scale) and fp16. Each thread turns the raw bytes
// it needs straight into MMA fragments, so a key or value makes one trip from shared memory to
// registers (attention_decode_tc_kivi.cu does the same for KIVI's codes).
//
// Keys are the MMA's M and the query heads of a GQA group its N (up to 8): S^T = K Q^T and
// O^T = V^T P^T, so a group of 4 heads wastes half of each MMA rather than three quarters, and
// O^T takes half the registers of O. Both products sum over an index whose order is free:
//   S^T sums over head dimensions: the A fragment wants, per thread, the dims {2q, 2q + 1,
//     2q + 8, 2q + 9} of keys g and g + 8 (g = lane / 4, q = lane % 4); any 4 physical dims will
//     do if Q^T's B fragment uses the same 4. Thread q takes 4 consecutive dims, so one 16-byte
//     shared load of a key row feeds 4 k-steps (fp8/int8) or 2 (fp16), converted in registers.
//   O^T sums over keys, and its rows (head dims) can be any dims as long as the store puts them
//     back. Thread g takes the dims [g D/8, (g + 1) D/8) of the 4 keys its A fragments need
//     (2q, 2q + 1, 2q + 8, 2q + 9): one load per key row, then byte (or half) permutes pair two
//     keys' values of a dim into a half2. P^T's accumulator becomes its B fragment by one
//     movmatrix transpose per 8 x 8 block.
// Rows are stored with their 16-byte chunks XOR-swizzled by row so that both access patterns
// are free of bank conflicts (fp8/int8 V at head dim 64: two-way).
//
// Grid and splits as the other decode kernels (attention_plan.h); 4 warps, each with its own
// 16 keys of every 64-key tile and its own ring of raw K/V stages filled by cp.async; the
// per-key K scale multiplies S's rows and the V scale rides in P. fp8 keeps the query's own
// block in fp16 staging (its residual): those keys come last, read from global memory.
#include <cassert>
#include <cmath>

#include "backend/cuda/kernels/attention_decode_launch.h"
#include "backend/cuda/kernels/attention_decode_tc_common.cuh"
#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/kernels/kv_quant.cuh"
#include "backend/cuda/programmatic_launch.cuh"

namespace folio::cuda::decode {
namespace {

using namespace detail;
using namespace tc;

constexpr int kHeads = 8;  // query heads per CTA at most (the MMA's N)

template <int kHeadDim, KvFormat kFormat>
struct DirectShape {
  static constexpr bool kScaled = kFormat != KvFormat::kFp16;
  static constexpr int kValueBytes = kScaled ? 1 : 2;
  static constexpr int kRowBytes = kHeadDim * kValueBytes;
  static constexpr int kRowChunks = kRowBytes / 16;
  static constexpr int kValuesPerChunk = 16 / kValueBytes;
  static constexpr int kStepsPerChunk = kValuesPerChunk / 4;  // k-steps one chunk of a key row feeds a thread
  static constexpr int kKeyGroups = kHeadDim / 16 / kStepsPerChunk;
  static constexpr int kThreadDims = kHeadDim / 8;  // head dims of each V row a thread converts
  static constexpr int kThreadVBytes = kThreadDims * kValueBytes;
  static constexpr int kScaleBytes = kScaled ? kWarpKeys * static_cast<int>(sizeof(float)) : 0;
  static constexpr int kHalfStageBytes = kWarpKeys * kRowBytes + kScaleBytes;  // K, or V
  static constexpr int kStages = kScaled ? 3 : 2;
  static constexpr size_t kWarpBytes = static_cast<size_t>(kStages) * 2 * kHalfStageBytes;
  static constexpr size_t kQBytes = kHeads * kHeadDim * 2;
  static constexpr size_t kMainBytes = kQBytes + kWarps * kWarpBytes;
  static constexpr size_t kMergeEnd = kQBytes + kMergeBytes<kHeadDim>;  // merge buffers after the query rows
  static constexpr size_t kSmemBytes = kMainBytes > kMergeEnd ? kMainBytes : kMergeEnd;
};

// Where chunk c of key row r lives in its row: swizzles found by enumerating the two access
// patterns' bank conflicts (none, except fp8/int8 V at head dim 64, two-way).
template <int kRowBytes>
__device__ __forceinline__ int key_chunk(int row, int chunk) {
  if constexpr (kRowBytes == 64) return chunk;
  return chunk ^ ((row & 1) << 2);
}
template <int kRowBytes>
__device__ __forceinline__ int value_chunk(int row, int chunk) {
  if constexpr (kRowBytes == 64) return chunk ^ (((row >> 2) & 1) << 1);
  if constexpr (kRowBytes == 256) return chunk ^ ((row >> 1) & 1) ^ (((row >> 2) & 1) << 2);
  return chunk ^ (((row >> 1) & 1) << 1) ^ (((row >> 2) & 1) << 2);
}

// Four values of a key (one word of fp8/int8 bytes, or two words of fp16) -> two half2 registers
// of the A fragment (its dims p, p + 1 and p + 2, p + 3).
template <KvFormat kFormat>
__device__ __forceinline__ void key_pair(const uint32_t* words, int sub, uint32_t& lo, uint32_t& hi) {
  if constexpr (kFormat == KvFormat::kFp16) {
    lo = words[2 * sub];
    hi = words[2 * sub + 1];
  } else {
    kv_to_half2x2(kFormat, words[sub], lo, hi);
  }
}

// O^T += V^T P^T for fp16 values: vw[r][mb] holds the thread's dims 2mb, 2mb + 1 of key row r
// (rows 2q, 2q + 1, 2q + 8, 2q + 9); b is P^T's B fragment.
template <int kHeadDim>
__device__ __forceinline__ void mma_fp16_values(float (&o)[kHeadDim / 16][4], const uint32_t (&vw)[4][kHeadDim / 16],
                                                const uint32_t (&b)[2]) {
#pragma unroll
  for (int mb = 0; mb < kHeadDim / 16; ++mb) {
    const uint32_t a[4] = {__byte_perm(vw[0][mb], vw[1][mb], 0x5410u), __byte_perm(vw[0][mb], vw[1][mb], 0x7632u),
                           __byte_perm(vw[2][mb], vw[3][mb], 0x5410u), __byte_perm(vw[2][mb], vw[3][mb], 0x7632u)};
    mma_16816(o[mb], a, b[0], b[1]);
  }
}

template <int kHeadDim, KvFormat kFormat>
__global__ void __launch_bounds__(kThreads)
    decode_tc_direct_kernel(const PagedAttentionArgs args, DecodeSplitPolicy policy, int32_t grid_splits,
                            int32_t splits_per_cta, int32_t rows, float* partial_out, float2* partial_stats) {
  let_next_kernel_start();  // the output projection after it prefetches its weights meanwhile
  using S = DirectShape<kHeadDim, kFormat>;
  extern __shared__ __align__(128) unsigned char smem[];
  uint16_t* q_smem = reinterpret_cast<uint16_t*>(smem);

  const int head0 = blockIdx.y * rows;
  const int seq = blockIdx.z;
  const KvLayerView& cache = args.cache;
  const int group_size = args.num_heads / cache.num_kv_heads;
  const int kv_head = head0 / group_size;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int g = lane / 4;
  const int q = lane % 4;
  unsigned char* warp_smem = smem + S::kQBytes + warp * S::kWarpBytes;

  const int token = args.cu_query_starts[seq];
  if (args.cu_query_starts[seq + 1] - token != 1) return;  // a prefill row: not ours
  const int context_len = args.context_lens[seq];
  const int split_tokens = decode_split_tokens(context_len, policy);
  const int num_splits = (context_len + split_tokens - 1) / split_tokens;
  const SplitRange walk = walked_splits(splits_per_cta, num_splits);
  if (walk.first >= walk.last) return;
  const int32_t* block_table = args.block_tables + static_cast<size_t>(seq) * args.max_blocks_per_seq;
  const BlockIndexer indexer(cache.block_size);
  // The split's keys are [begin, end); the warp's [key0(j), key0(j) + 16) of tile j from
  // warp_begin, while key0 < end. Set by the split loop below.
  int begin = 0, end = 0, warp_begin = 0;
  // fp8 keeps the query's own block in fp16 (kv_format_has_residual): keys from own_start on are
  // read from the staging block the query's K/V went to. The ring takes the sealed keys
  // [begin, sealed_end); the staged ones [sealed_end, end), at most block_size of a sequence,
  // come after it straight from global memory. Blocks are multiples of 16 keys, so each warp
  // step of 16 is wholly sealed or wholly staged.
  constexpr bool kResidual = kv_format_has_residual(kFormat);
  int own_start = context_len, sealed_end = 0;
  const uint16_t* own_k = nullptr;
  const uint16_t* own_v = nullptr;
  if constexpr (kResidual) {
    own_start = (context_len - 1) / cache.block_size * cache.block_size;
    const int slot = args.slot_mapping[token];
    const int own_staging = slot >= 0 ? slot / cache.block_size : 0;  // padding rows read any staging block
    own_k = cache.staging_row(0, own_staging, 0, kv_head);
    own_v = cache.staging_row(1, own_staging, 0, kv_head);
  }

  // Q, row-major (rows [0, rows) are the CTA's heads, the rest zero), then each thread's B
  // fragments of Q^T for head g in the dim order its key loads use: k-step ks reads the 4 dims
  // from p of chunk (ks / kStepsPerChunk) * 4 + q.
  load_query_rows<kHeadDim, kHeads>(q_smem, args, token, head0, rows);
  uint32_t q_frag[kHeadDim / 16][2];
#pragma unroll
  for (int ks = 0; ks < kHeadDim / 16; ++ks) {
    const int p = ((ks / S::kStepsPerChunk) * 4 + q) * S::kValuesPerChunk + 4 * (ks % S::kStepsPerChunk);
    q_frag[ks][0] = *reinterpret_cast<const uint32_t*>(q_smem + g * kHeadDim + p);
    q_frag[ks][1] = *reinterpret_cast<const uint32_t*>(q_smem + g * kHeadDim + p + 2);
  }

  // Raw rows of step `step` into ring stage `stage`: K rows, K scales, V rows, V scales. Rows
  // past `sealed_end` are zero-filled (their scores are masked; their V rows are zero). The step's
  // 16 keys lie in one block (blocks and splits are multiples of 16 keys), whose scales are
  // [head][slot]: the 16 scales of K (and of V) are one 64-byte piece, four 16-byte copies. A
  // piece that is partly past sealed_end is copied whole (same block, in bounds); the loop
  // zeroes the scales of keys past it where they could meet a zero weight (0 x NaN).
  auto load_raw = [&](int step, int stage) {
    unsigned char* k_dst = warp_smem + stage * 2 * S::kHalfStageBytes;
    unsigned char* v_dst = k_dst + S::kHalfStageBytes;
    const int key0 = warp_begin + step * kTile;
    for (int i = lane; i < kWarpKeys * S::kRowChunks; i += 32) {
      const int row = i / S::kRowChunks;
      const int chunk = i % S::kRowChunks;
      const int pos = key0 + row;
      const bool valid = pos < sealed_end;
      size_t values = 0;
      if (valid)
        values = cache.value_offset(block_table[indexer.block(pos)], indexer.offset(pos), kv_head) + chunk * 16;
      cp_async_16(k_dst + row * S::kRowBytes + 16 * key_chunk<S::kRowBytes>(row, chunk), cache.k + values, valid);
      cp_async_16(v_dst + row * S::kRowBytes + 16 * value_chunk<S::kRowBytes>(row, chunk), cache.v + values, valid);
    }
    if constexpr (S::kScaled) {
      if (lane < 2 * (kWarpKeys / 4)) {  // lanes 0-3: K's four pieces of 4 scales; 4-7: V's
        const int piece = lane % (kWarpKeys / 4);
        const int pos = key0 + 4 * piece;
        const bool valid = pos < sealed_end;
        size_t scale = 0;
        if (valid) scale = cache.scale_offset(block_table[indexer.block(pos)], indexer.offset(pos), kv_head);
        unsigned char* dst = (lane < kWarpKeys / 4 ? k_dst : v_dst) + kWarpKeys * S::kRowBytes + 16 * piece;
        cp_async_16(dst, (lane < kWarpKeys / 4 ? cache.k : cache.v) + scale, valid);
      }
    }
  };

  const float score_scale = args.scale * kLog2e;

  const DecodeOutput row_out = decode_output(args, seq, token, head0, rows, num_splits, grid_splits);
  for (int split = walk.first; split < walk.last; ++split) {
    begin = split * split_tokens;
    end = min(context_len, begin + split_tokens);
    sealed_end = kResidual ? max(begin, min(end, own_start)) : end;
    warp_begin = begin + warp * kWarpKeys;
    const int num_steps = warp_begin < sealed_end ? (sealed_end - warp_begin + kTile - 1) / kTile : 0;
    // O^T: o[mb] is the 16 x 8 block (head dims dim_of(mb, g), dim_of(mb, g + 8)) x (heads 2q,
    // 2q + 1); stats are per head 2q + i.
    float o[kHeadDim / 16][4];
#pragma unroll
    for (int mb = 0; mb < kHeadDim / 16; ++mb)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mb][e] = 0.0f;
    float head_max[2] = {-INFINITY, -INFINITY};
    float head_sum[2] = {0.0f, 0.0f};  // this thread's keys only; summed over g at the end
    // The online softmax of one 16-key step, per head (column): s holds this thread's scores
    // (scaled, masked to -inf), key g of the step is valid so each head's max is finite. Rescales
    // O^T and the sums and turns P^T (each key's V scale folded in) into the B fragment of
    // O^T += V^T P^T: b[0] holds keys 2q, 2q + 1 of head g, b[1] keys 2q + 8, 2q + 9.
    auto softmax_step = [&](float(&s)[4], const float(&v_scale)[2], uint32_t(&b)[2]) {
      float alpha[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        float tile_max = fmaxf(s[i], s[2 + i]);
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 4));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 8));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 16));
        const float new_max = fmaxf(head_max[i], tile_max);
        alpha[i] = exp2_ftz(head_max[i] - new_max);
        head_max[i] = new_max;
        s[i] = exp2_ftz(s[i] - new_max);
        s[2 + i] = exp2_ftz(s[2 + i] - new_max);
        head_sum[i] = head_sum[i] * alpha[i] + s[i] + s[2 + i];
      }
      rescale_heads_as_n(o, alpha);
      b[0] = transpose8x8(pack_half2(s[0] * v_scale[0], s[1] * v_scale[0]));
      b[1] = transpose8x8(pack_half2(s[2] * v_scale[1], s[3] * v_scale[1]));
    };

#pragma unroll
    for (int s = 0; s < S::kStages - 1; ++s) {
      if (s < num_steps) load_raw(s, s);
      cp_async_commit();
    }
    for (int j = 0; j < num_steps; ++j) {
      cp_async_wait<S::kStages - 2>();
      __syncwarp();  // step j's copies are in for every lane; step j - 1's stage is free again
      if (j + S::kStages - 1 < num_steps) load_raw(j + S::kStages - 1, (j + S::kStages - 1) % S::kStages);
      cp_async_commit();
      const unsigned char* k_raw = warp_smem + (j % S::kStages) * 2 * S::kHalfStageBytes;
      const unsigned char* v_raw = k_raw + S::kHalfStageBytes;
      const int key0 = warp_begin + j * kTile;

      // S^T = K Q^T, 16 keys x 8 heads: the A fragment is key rows g and g + 8.
      float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int kg = 0; kg < S::kKeyGroups; ++kg) {
        const uint4 lo =
            *reinterpret_cast<const uint4*>(k_raw + g * S::kRowBytes + 16 * key_chunk<S::kRowBytes>(g, kg * 4 + q));
        const uint4 hi = *reinterpret_cast<const uint4*>(k_raw + (g + 8) * S::kRowBytes +
                                                         16 * key_chunk<S::kRowBytes>(g + 8, kg * 4 + q));
        const uint32_t lo_words[4] = {lo.x, lo.y, lo.z, lo.w};
        const uint32_t hi_words[4] = {hi.x, hi.y, hi.z, hi.w};
#pragma unroll
        for (int sub = 0; sub < S::kStepsPerChunk; ++sub) {
          uint32_t a[4];
          key_pair<kFormat>(lo_words, sub, a[0], a[2]);
          key_pair<kFormat>(hi_words, sub, a[1], a[3]);
          mma_16816(s, a, q_frag[kg * S::kStepsPerChunk + sub][0], q_frag[kg * S::kStepsPerChunk + sub][1]);
        }
      }
      // s[0], s[1]: key g, heads 2q, 2q + 1; s[2], s[3]: key g + 8.
      const bool valid_lo = key0 + g < sealed_end;
      const bool valid_hi = key0 + g + 8 < sealed_end;
      float k_scale[2] = {1.0f, 1.0f}, v_scale[2] = {1.0f, 1.0f};
      if constexpr (S::kScaled) {
        const float* k_scales = reinterpret_cast<const float*>(k_raw + kWarpKeys * S::kRowBytes);
        const float* v_scales = reinterpret_cast<const float*>(v_raw + kWarpKeys * S::kRowBytes);
        k_scale[0] = k_scales[g];
        k_scale[1] = k_scales[g + 8];
        v_scale[0] = valid_lo ? v_scales[g] : 0.0f;  // a key past sealed_end may share a valid key's piece
        v_scale[1] = valid_hi ? v_scales[g + 8] : 0.0f;
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const bool valid = e < 2 ? valid_lo : valid_hi;
        s[e] = valid ? s[e] * score_scale * k_scale[e / 2] : -INFINITY;
      }
      uint32_t b[2];
      softmax_step(s, v_scale, b);

      // V^T's A fragment for m-block mb: keys 2q, 2q + 1 (a0, a1) and 2q + 8, 2q + 9 (a2, a3) at
      // head dims dim_of(mb, g) (a0, a2) and dim_of(mb, g + 8) (a1, a3): consecutive dims 2mb and
      // 2mb + 1 of the thread's kThreadDims.
      constexpr int kWords = S::kThreadVBytes / 4;
      uint32_t vw[4][kWords];
      const int key_rows[4] = {2 * q, 2 * q + 1, 2 * q + 8, 2 * q + 9};
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = key_rows[r];
        const unsigned char* base = v_raw + row * S::kRowBytes;
        if constexpr (S::kThreadVBytes == 8) {
          const uint2 w =
              *reinterpret_cast<const uint2*>(base + 16 * value_chunk<S::kRowBytes>(row, g / 2) + 8 * (g % 2));
          vw[r][0] = w.x;
          vw[r][1] = w.y;
        } else {
#pragma unroll
          for (int c = 0; c < S::kThreadVBytes / 16; ++c) {
            const uint4 w = *reinterpret_cast<const uint4*>(
                base + 16 * value_chunk<S::kRowBytes>(row, g * (S::kThreadVBytes / 16) + c));
            vw[r][4 * c] = w.x;
            vw[r][4 * c + 1] = w.y;
            vw[r][4 * c + 2] = w.z;
            vw[r][4 * c + 3] = w.w;
          }
        }
      }
      if constexpr (kFormat == KvFormat::kFp16) {
        mma_fp16_values<kHeadDim>(o, vw, b);  // word mb holds the thread's dims 2mb, 2mb + 1
      } else {
#pragma unroll
        for (int w = 0; w < kWords; ++w) {  // word w holds the thread's dims 4w .. 4w + 3: m-blocks 2w, 2w + 1
          uint32_t even[4], odd[4];
          kv_to_half2x2(kFormat, __byte_perm(vw[0][w], vw[1][w], 0x5140u), even[0], even[1]);
          kv_to_half2x2(kFormat, __byte_perm(vw[0][w], vw[1][w], 0x7362u), odd[0], odd[1]);
          kv_to_half2x2(kFormat, __byte_perm(vw[2][w], vw[3][w], 0x5140u), even[2], even[3]);
          kv_to_half2x2(kFormat, __byte_perm(vw[2][w], vw[3][w], 0x7362u), odd[2], odd[3]);
          mma_16816(o[2 * w], even, b[0], b[1]);
          mma_16816(o[2 * w + 1], odd, b[0], b[1]);
        }
      }
    }

    // The staged keys (residual formats): fp16 rows of the query's own block, read from global
    // memory into the fragments the ring's fp16 path builds in shared memory, in the same dim
    // order (the K words of k-step ks are dims p .. p + 3; V words are the thread's dims).
    if constexpr (kResidual) {
      const size_t stride = static_cast<size_t>(cache.num_kv_heads) * kHeadDim;  // halves between staged tokens
      for (int key0 = warp_begin + num_steps * kTile; key0 < end; key0 += kTile) {
        const bool valid_lo = key0 + g < end;
        const bool valid_hi = key0 + g + 8 < end;
        const uint16_t* k_lo = own_k + static_cast<size_t>(key0 + g - own_start) * stride;
        float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int ks = 0; ks < kHeadDim / 16; ++ks) {
          const int p = ((ks / S::kStepsPerChunk) * 4 + q) * S::kValuesPerChunk + 4 * (ks % S::kStepsPerChunk);
          const uint2 lo = valid_lo ? *reinterpret_cast<const uint2*>(k_lo + p) : make_uint2(0, 0);
          const uint2 hi = valid_hi ? *reinterpret_cast<const uint2*>(k_lo + 8 * stride + p) : make_uint2(0, 0);
          const uint32_t a[4] = {lo.x, hi.x, lo.y, hi.y};
          mma_16816(s, a, q_frag[ks][0], q_frag[ks][1]);
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) s[e] = (e < 2 ? valid_lo : valid_hi) ? s[e] * score_scale : -INFINITY;
        const float v_scale[2] = {1.0f, 1.0f};
        uint32_t b[2];
        softmax_step(s, v_scale, b);
        uint32_t vw[4][kHeadDim / 16];
        const int key_rows[4] = {2 * q, 2 * q + 1, 2 * q + 8, 2 * q + 9};
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int pos = key0 + key_rows[r];
          const uint16_t* row = own_v + static_cast<size_t>(pos - own_start) * stride + g * (kHeadDim / 8);
#pragma unroll
          for (int c = 0; c < kHeadDim / 64; ++c) {  // 8 halves a load, kHeadDim / 8 halves a thread
            const uint4 w = pos < end ? *reinterpret_cast<const uint4*>(row + 8 * c) : make_uint4(0, 0, 0, 0);
            vw[r][4 * c] = w.x;
            vw[r][4 * c + 1] = w.y;
            vw[r][4 * c + 2] = w.z;
            vw[r][4 * c + 3] = w.w;
          }
        }
        mma_fp16_values<kHeadDim>(o, vw, b);
      }
    }

    DecodeOutput out = row_out;
    out.split = split;
    finish_heads_as_n<kHeadDim>(
        smem + S::kQBytes, args, out, head_max, head_sum, o,
        [&](int mb, int r) { return g * S::kThreadDims + 2 * mb + r; }, partial_out, partial_stats);
    if (split + 1 < walk.last) __syncthreads();  // the merge buffers overlap the rings the next split fills
  }
  if (gridDim.x == 1 && num_splits > 1) combine_walked_splits<kHeadDim>(args, row_out, partial_out, partial_stats);
}

template <int kHeadDim, KvFormat kFormat>
bool launch_direct_for_dim(const PagedAttentionArgs& args, DecodeSplitPolicy policy, int32_t grid_splits,
                           float* partial_out, float2* partial_stats, Stream stream) {
  using S = DirectShape<kHeadDim, kFormat>;
  static const int64_t cta_slots = [] {
    cudaFuncSetAttribute(decode_tc_direct_kernel<kHeadDim, kFormat>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(S::kSmemBytes));
    return decode_cta_slots(decode_tc_direct_kernel<kHeadDim, kFormat>, S::kSmemBytes);
  }();
  const int rows = largest_group_tile(args.num_heads / args.cache.num_kv_heads, kHeads);
  const int64_t row_count = static_cast<int64_t>(args.num_heads / rows) * args.num_seqs;
  const DecodeWalk walk = decode_walk(row_count, grid_splits, cta_slots, policy.ctas_per_row);
  const dim3 grid(walk.ctas_per_row, args.num_heads / rows, args.num_seqs);
  decode_tc_direct_kernel<kHeadDim, kFormat><<<grid, kThreads, S::kSmemBytes, stream>>>(
      args, policy, grid_splits, walk.splits_per_cta, rows, partial_out, partial_stats);
  return walk.ctas_per_row == 1;
}

}  // namespace

template <KvFormat kFormat>
bool launch_decode_tc_direct(const PagedAttentionArgs& args, DecodeSplitPolicy policy, int32_t grid_splits,
                             float* partial_out, float2* partial_stats, Stream stream) {
  // A warp's 16-key step is wholly sealed or wholly staged (kv_format_shape_error's rule).
  assert(!kv_format_has_residual(kFormat) || args.cache.block_size % 16 == 0);
  if (args.cache.head_dim == 64) {
    return launch_direct_for_dim<64, kFormat>(args, policy, grid_splits, partial_out, partial_stats, stream);
  }
  return launch_direct_for_dim<128, kFormat>(args, policy, grid_splits, partial_out, partial_stats, stream);
}

template bool launch_decode_tc_direct<KvFormat::kFp16>(const PagedAttentionArgs&, DecodeSplitPolicy, int32_t, float*,
                                                       float2*, Stream);
template bool launch_decode_tc_direct<KvFormat::kFp8E4M3>(const PagedAttentionArgs&, DecodeSplitPolicy, int32_t, float*,
                                                          float2*, Stream);
template bool launch_decode_tc_direct<KvFormat::kInt8>(const PagedAttentionArgs&, DecodeSplitPolicy, int32_t, float*,
                                                       float2*, Stream);

}  // namespace folio::cuda::decode
