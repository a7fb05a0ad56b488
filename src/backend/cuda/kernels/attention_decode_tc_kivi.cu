// Paged decode attention on tensor cores for the KIVI caches (kivi4, kivi2), codes straight into
// MMA fragments: no fp16 tile is written to shared memory and no value goes through a float.
//
// The kernel before the register-direct one (git history; its figures in docs/BENCHMARKS.md)
// unpacked every code into a float, scaled it, rounded it to fp16 and stored it to a shared tile
// before an MMA read it back: about 7 instructions a value. Here every scale is folded into the
// other operand and every code enters an MMA as an fp16 number made by one logic op:
//   Keys (KIVI: per channel over a 32-token group, score = sum_c q_c (s_c code_ct + m_c)):
//     the group's scales fold into the query once a group (q'_c = q_c s_c, one hmul2 per two
//     channels), sum_c q_c m_c (the same for every key of the group) comes from MMAs of the raw
//     query with the minima.
//   Values (per token over 32 channels, O = sum_t p_t (s_t code_t + m_t)): the scales fold into
//     P (P'_t = p_t s_t, one hmul2 per two keys and group: each group has its own B fragments),
//     and sum_t p_t m_t (one number a head and group) comes from an MMA of P with the minima.
// A code OR-ed into the mantissa of 1024 (fp16) at bit sh reads as 1024 + code 2^sh, exactly
// (the magic number trick: one LOP3 a fragment register, one magic for every bit position). The
// offset is not subtracted a value at a time: sum_c q'_c (1024 + code_c 2^sh) = 2^sh sum_c q'_c
// code_c + 1024 sum_c q'_c, so an MMA of the same fp16 q' (or P') with ones gives sum q' exactly
// in fp32, and one fp32 fma a score (a step) or an output (the end) removes the offset and the
// power of two. The fp32 sums hold the offset's multiples (~1000 x) in 24 bits: the error is
// ~2^-13 of sum q'_c, far under the codes' own rounding (half a scale). A byte permute gathers
// the two codes an fp16x2 fragment register pairs (two channels of one key for S, two keys of
// one channel for P V) from the two words that hold them.
//
// Keys are the MMA's M and the GQA group's query heads its N (S^T = K Q^T, O^T = V^T P^T), as in
// attention_decode_tc_direct.cu. A warp takes a whole 32-key group a step (two 16-key m-tiles;
// the CTA's 4 warps 128 keys), so the folded query and the minima's term serve 32 keys. The key
// order inside an m-tile is free as long as P^T's k order follows it: row g is key 2g and row
// g + 8 key 2g + 1, so a thread's two rows sit in one byte of a channel's codes. Thread g owns
// dims {32G + 4g + i} of value group G (i < 4), so its codes of a value row are one byte (2-bit)
// or two (4-bit) a group. The query's own block (KIVI's fp16 residual) comes after the sealed
// keys, 16 keys a warp step, read from the staging block in global memory.
#include <atomic>
#include <cassert>
#include <cmath>

#include "backend/cuda/kernels/attention_decode_launch.h"
#include "backend/cuda/kernels/attention_decode_tc_common.cuh"
#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/kernels/kivi.cuh"
#include "backend/cuda/programmatic_launch.cuh"

namespace folio::cuda::decode {
namespace {

using namespace detail;
using namespace tc;

constexpr int kHeads = 8;      // query heads per CTA at most (the MMA's N)
constexpr int kStepKeys = 32;  // a warp's keys a sealed step: one KIVI group
constexpr int kCtaKeys = kWarps * kStepKeys;

template <int kHeadDim, int kBits>
struct KiviDirectShape {
  static constexpr int kGroups = kHeadDim / kKiviGroup;           // value groups a row
  static constexpr int kChannelBytes = kKiviGroup * kBits / 8;    // a key channel's codes in a group
  static constexpr int kKeyCodeBytes = kHeadDim * kChannelBytes;  // then scale [D] and minimum [D], fp16
  static constexpr int kKeyBytes = kKeyCodeBytes + kHeadDim * 4;  // the whole group, as in the cache
  static constexpr int kValueCodeBytes = kHeadDim * kBits / 8;    // then scale [G] and minimum [G], fp16
  static constexpr int kValueRowBytes = kValueCodeBytes + kGroups * 4;
  static constexpr int kValueChunk = kValueRowBytes % 16 == 0 ? 16 : 8;  // copy unit of a value row
  static constexpr int kStageBytes = kKeyBytes + kStepKeys * kValueRowBytes;
  // Two ring stages a warp: 4 CTAs an SM fit kivi4's shared memory then (H100, b64 x 4k: kivi4
  // 0.1647 -> 0.1576 ms against 3 stages, kivi2 0.1249 -> 0.1235).
  static constexpr int kStages = 2;
  static constexpr size_t kWarpBytes = static_cast<size_t>(kStages) * kStageBytes;
  static constexpr size_t kQBytes = kHeads * kHeadDim * 2;
  static constexpr size_t kMainBytes = kQBytes + kWarps * kWarpBytes;
  // The merge buffers come after the rings (the next split's first copies fly while a split
  // merges), then the running fold of a CTA that walks all of its row's splits; both sized for
  // the CTA's query heads: 4 CTAs an SM for kivi4 at GQA 4 then (3 at GQA 8).
  static constexpr size_t smem_bytes(int rows) {
    return kMainBytes + merge_bytes<kHeadDim>(rows) + fold_bytes<kHeadDim>(rows);
  }
  static constexpr size_t kMaxSmemBytes = smem_bytes(kRows);
  static_assert(kKeyBytes % 16 == 0 && kStageBytes % 16 == 0, "16-byte copies");
  static_assert(kGroups == 2 || kGroups == 4, "head_dim 64 or 128");
  // Vector loads of a value row's scales and minima: 16-byte (or 8-byte) aligned rows.
  static_assert((kValueRowBytes % 16 == 0 && kValueCodeBytes % 16 == 0) || kGroups == 2, "aligned tails");
};

__device__ __forceinline__ __half2 as_half2(uint32_t u) {
  return *reinterpret_cast<const __half2*>(&u);
}
__device__ __forceinline__ uint32_t as_bits(__half2 h) {
  return *reinterpret_cast<const uint32_t*>(&h);
}

// fp16x2 (1024, 1024): a code OR-ed in at bits [sh, sh + bits) of a half reads as 1024 +
// code 2^sh, exactly (integers to 2048 are fp16 numbers). One magic for every position, so one
// register; the weight 2^sh is undone in fp32 with the offset.
constexpr uint32_t kMagic = 0x64006400u;
constexpr float kCodeOffset = 1024.0f;

// (t & mask) | magic as one LOP3: written as C++ the compiler emits an AND and an OR when both
// constants are immediates (SASS has one immediate slot), two instructions a fragment register.
__device__ __forceinline__ uint32_t codes_with_offset(uint32_t t, uint32_t mask, uint32_t magic) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(t), "r"(mask), "r"(magic));
  return d;
}
template <int kBits, int kShift>
__device__ __forceinline__ uint32_t codes_with_offset(uint32_t t, uint32_t magic) {
  constexpr uint32_t kMask = ((1u << kBits) - 1) << kShift;
  return codes_with_offset(t, kMask | kMask << 16, magic);
}
// 2^-sh: what a code at bit sh is worth once read as 1024 + code 2^sh.
__host__ __device__ constexpr float code_weight(int sh) {
  return 1.0f / static_cast<float>(1 << sh);
}

// Byte b of x in the low half and byte b of y in the high half (the other bytes are junk the
// masks drop).
__device__ __forceinline__ uint32_t pair_bytes(uint32_t x, uint32_t y, int b) {
  return __byte_perm(x, y, static_cast<uint32_t>(b) | (static_cast<uint32_t>(4 + b) << 8));
}
// fp16 number i (0 or 1 in a word) of x and of y, as (x's, y's).
__device__ __forceinline__ uint32_t pair_halves(uint32_t x, uint32_t y, int i) {
  return __byte_perm(x, y, i == 0 ? 0x5410u : 0x7632u);
}

// The online softmax of one warp step of kT m-tiles, per head (column): s holds this thread's
// scores (scaled, masked to -inf; the step's first key is valid, so each head's max is finite).
// Rescales O^T and the sums (alpha: the factor per head, for the caller's other accumulators)
// and turns P^T into the B fragments of O^T += V^T P^T: b[t][0] holds m-tile t's rows 2q, 2q + 1
// of head g, b[t][1] its rows 2q + 8, 2q + 9.
template <int kT, int kHeadDim>
__device__ __forceinline__ void softmax_step(float (&s)[kT][4], float (&head_max)[2], float (&head_sum)[2],
                                             float (&o)[kHeadDim / 16][4], uint32_t (&b)[kT][2], float (&alpha)[2]) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int t = 0; t < kT; ++t) tile_max = fmaxf(tile_max, fmaxf(s[t][i], s[t][2 + i]));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 4));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 8));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 16));
    const float new_max = fmaxf(head_max[i], tile_max);
    alpha[i] = exp2_ftz(head_max[i] - new_max);
    head_max[i] = new_max;
    float sum = 0.0f;
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      s[t][i] = exp2_ftz(s[t][i] - new_max);
      s[t][2 + i] = exp2_ftz(s[t][2 + i] - new_max);
      sum += s[t][i] + s[t][2 + i];
    }
    head_sum[i] = head_sum[i] * alpha[i] + sum;
  }
  rescale_heads_as_n(o, alpha);
#pragma unroll
  for (int t = 0; t < kT; ++t) {
    b[t][0] = transpose8x8(pack_half2(s[t][0], s[t][1]));
    b[t][1] = transpose8x8(pack_half2(s[t][2], s[t][3]));
  }
}

// 4 CTAs an SM: 128 registers (ptxas spills 24-28 bytes, 36-40 reloads, at head_dim 128, none at 64; 150-160
// registers unbounded).
template <int kHeadDim, KvFormat kFormat>
__global__ void __launch_bounds__(kThreads, 4)
    decode_kivi_direct_kernel(const PagedAttentionArgs args, DecodeSplitPolicy policy, int32_t grid_splits,
                              int32_t splits_per_cta, int32_t rows, float* partial_out, float2* partial_stats) {
  let_next_kernel_start();  // the output projection after it prefetches its weights meanwhile
  constexpr int kBits = kivi_bits(kFormat);
  using S = KiviDirectShape<kHeadDim, kBits>;
  constexpr int kMBlocks = kHeadDim / 16;
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
  // Keys before own_start are sealed; the query's own block [own_start, context_len) is staged
  // fp16. Blocks and splits are multiples of the 32-key group, so every sealed step is one
  // whole group.
  const int own_start = (context_len - 1) / cache.block_size * cache.block_size;
  const int slot = args.slot_mapping[token];
  const int own_staging = slot >= 0 ? slot / cache.block_size : 0;  // padding rows read any staging block
  const uint16_t* own_k = cache.staging_row(0, own_staging, 0, kv_head);
  const uint16_t* own_v = cache.staging_row(1, own_staging, 0, kv_head);
  // A split's keys are [begin, end), sealed up to sealed_end; the warp's steps in it start at
  // begin + warp * kStepKeys, one a kCtaKeys.
  auto split_begin = [&](int split) { return split * split_tokens; };
  auto split_end = [&](int split) { return min(context_len, split_begin(split) + split_tokens); };
  auto split_sealed_end = [&](int split) { return max(split_begin(split), min(split_end(split), own_start)); };
  auto warp_steps = [&](int split) {
    const int first = split_begin(split) + warp * kStepKeys;
    const int sealed = split_sealed_end(split);
    return first < sealed ? (sealed - first + kCtaKeys - 1) / kCtaKeys : 0;
  };

  // Q, row-major (rows [0, rows) are the CTA's heads, the rest zero); the thread's B fragments
  // of Q^T for head g: k-step ks takes dims 16 ks + 4q .. + 3.
  load_query_rows<kHeadDim, kHeads>(q_smem, args, token, head0, rows);
  // The thread's B fragment of Q^T for k-step ks (head g, dims 16 ks + 4q .. + 3), read from
  // shared memory where it is used: 16 registers fewer across the loop (the kernel is held to
  // 128 for 4 CTAs an SM). H100, b64 x 4k, with 9b72711's other changes: kivi2 0.1235 -> 0.1222
  // ms, kivi4 0.1576 -> 0.1633 (kivi4 in registers and without the rescale vote is unmeasured).
  auto q_frag = [&](int ks) { return *reinterpret_cast<const uint2*>(q_smem + g * kHeadDim + 16 * ks + 4 * q); };

  // A sealed step's raw bytes: the key group as the cache holds it, then the 32 value rows. A
  // step's two base addresses are cache.kivi_*_offset's arithmetic with the format's sizes known
  // at compile time; each 16-byte copy then costs an add (ncu: the copies were ~200 instructions
  // a step when every chunk redid the offsets with run-time sizes, a fifth of the kernel's).
  // Sizes in 32 bits (a block of one layer is far below 4 GB), from the kernel's parameters:
  // no registers held across the loop.
  auto block_bytes = [&] { return cache.block_size * cache.num_kv_heads * S::kValueRowBytes; };
  auto token_stride = [&] { return cache.num_kv_heads * S::kValueRowBytes; };  // between value rows
  constexpr int kKeyChunks = S::kKeyBytes / 16;
  constexpr int kValueChunks = S::kValueRowBytes / S::kValueChunk;  // a row's
  constexpr int kLaneValueChunks = kStepKeys * kValueChunks / 32;   // a lane's, a step
  static_assert(kStepKeys * kValueChunks % 32 == 0, "whole lanes");
  auto load_raw = [&](int key0, int stage) {
    unsigned char* k_dst = warp_smem + stage * S::kStageBytes;
    unsigned char* v_dst = k_dst + S::kKeyBytes;
    const size_t block_offset = static_cast<size_t>(block_table[indexer.block(key0)]) * block_bytes();
    const int in_block = indexer.offset(key0);
    const uint8_t* group =
        cache.k + block_offset + (kv_head * (cache.block_size / kKiviGroup) + in_block / kKiviGroup) * S::kKeyBytes;
#pragma unroll
    for (int k = 0; k < (kKeyChunks + 31) / 32; ++k) {
      const int i = lane + 32 * k;
      if (kKeyChunks % 32 == 0 || i < kKeyChunks) cp_async_16(k_dst + 16 * i, group + 16 * i, true);
    }
    const uint8_t* rows = cache.v + block_offset + (in_block * cache.num_kv_heads + kv_head) * S::kValueRowBytes;
#pragma unroll
    for (int k = 0; k < kLaneValueChunks; ++k) {
      const int i = lane + 32 * k;  // rows are contiguous in shared memory: chunk i lands at i chunks
      const int row = i / kValueChunks;
      const uint8_t* src = rows + row * token_stride() + (i - row * kValueChunks) * S::kValueChunk;
      if constexpr (S::kValueChunk == 16) {
        cp_async_16(v_dst + 16 * i, src, true);
      } else {
        cp_async_8(v_dst + 8 * i, src, true);
      }
    }
  };

  const float score_scale = args.scale * kLog2e;

  // Where a thread's two key rows (2g and 2g + 1 of an m-tile) sit in a channel's codes.
  constexpr int kTileBits = 16 * kBits;  // an m-tile's codes of one channel
  const int key_bit = 2 * g * kBits;
  const int key_byte = key_bit / 8;
  const int key_shift = key_bit % 8;
  const uint32_t code_mask = (1u << kBits) - 1;
  const uint32_t mask_lo = (code_mask << key_shift) | (code_mask << (key_shift + 16));
  const uint32_t mask_hi = (code_mask << (key_shift + kBits)) | (code_mask << (key_shift + kBits + 16));
  const uint32_t magic = kMagic;  // a register operand of codes_with_offset's LOP3
  // Score rows g (key 2g) and g + 8 (key 2g + 1) read their codes at bits key_shift and
  // key_shift + kBits: (raw - 1024 sum_c q'_c) times these weights, then the softmax's scale.
  const float key_weight[2] = {code_weight(key_shift) * score_scale, code_weight(key_shift + kBits) * score_scale};
  constexpr uint32_t kOnes = 0x3c003c00u;  // fp16x2 (1, 1)
  const bool minimum_row = g >= 4 && g - 4 < S::kGroups;
  const int minimum_offset = S::kValueCodeBytes + 2 * S::kGroups + 2 * (minimum_row ? g - 4 : 0);

  // The warp's copies run ahead of its steps through all the CTA's splits, one ring: when a
  // split's last step is taken the next split's first stage is already on its way, and flies
  // while the split merges. copy_split / copy_step: the next step to copy; every call commits
  // one group (empty once all are issued), so group n holds step n and stage n % kStages.
  int copy_split = walk.first, copy_step = 0, copy_steps = warp_steps(walk.first), copies = 0, taken = 0;
  auto copy_next = [&] {
    while (copy_step == copy_steps && copy_split + 1 < walk.last) {
      ++copy_split;
      copy_step = 0;
      copy_steps = warp_steps(copy_split);
    }
    if (copy_step < copy_steps) {
      load_raw(split_begin(copy_split) + warp * kStepKeys + copy_step * kCtaKeys, copies % S::kStages);
      ++copy_step;
      ++copies;
    }
    cp_async_commit();
  };
#pragma unroll
  for (int s = 0; s < S::kStages - 1; ++s) copy_next();

  const DecodeOutput row_out = decode_output(args, seq, token, head0, rows, num_splits, grid_splits);
  for (int split = walk.first; split < walk.last; ++split) {
    const int end = split_end(split);
    const int sealed_end = split_sealed_end(split);
    const int num_steps = warp_steps(split);
    // O^T: o[2G + h] is the 16 x 8 block (dims 32G + 4g + 2h, 32G + 4g + 2h + 1) x (heads 2q,
    // 2q + 1); stats are per head 2q + i.
    float o[kMBlocks][4];
#pragma unroll
    for (int mb = 0; mb < kMBlocks; ++mb)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mb][e] = 0.0f;
    float head_max[2] = {-INFINITY, -INFINITY};
    float head_sum[2] = {0.0f, 0.0f};  // this thread's keys only; summed over g at the end
    // The values' corrections, one MMA accumulator (rows g and g + 8, heads 2q and 2q + 1): row G
    // < kGroups sums P'_G = P s_G over the keys (times the codes' offsets, subtracted at the end),
    // row 4 + G sums P m_G (added at the end); rows g + 8 stay zero.
    float correction[4] = {0.0f, 0.0f, 0.0f, 0.0f};

    for (int j = 0; j < num_steps; ++j) {
      cp_async_wait<S::kStages - 2>();
      __syncwarp();  // this step's copies are in for every lane; the last step's stage is free again
      copy_next();
      const unsigned char* k_raw = warp_smem + (taken++ % S::kStages) * S::kStageBytes;
      const unsigned char* v_raw = k_raw + S::kKeyBytes;

      // Per 16 channels: the group's terms sum_c q_c m_c and sum_c q'_c (every row alike), the
      // folded query q'_c = q_c s_c, and S^T += (offset + codes) Q'^T per m-tile t (the step's
      // keys 16t + 2g, + 1); one pass, so q' lives for its 16 channels only.
      float bias[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      float q_sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
      for (int ks = 0; ks < kMBlocks; ++ks) {
        const int c0 = 16 * ks + 4 * q;
        const uint2 sc = *reinterpret_cast<const uint2*>(k_raw + S::kKeyCodeBytes + 2 * c0);
        const uint2 mn = *reinterpret_cast<const uint2*>(k_raw + S::kKeyCodeBytes + 2 * kHeadDim + 2 * c0);
        const uint32_t a_min[4] = {mn.x, mn.x, mn.y, mn.y};
        const uint2 qk = q_frag(ks);
        mma_16816(bias, a_min, qk.x, qk.y);
        const uint32_t qs0 = as_bits(__hmul2(as_half2(qk.x), as_half2(sc.x)));
        const uint32_t qs1 = as_bits(__hmul2(as_half2(qk.y), as_half2(sc.y)));
        const uint32_t ones[4] = {kOnes, kOnes, kOnes, kOnes};
        mma_16816(q_sum, ones, qs0, qs1);
        const unsigned char* codes = k_raw + c0 * S::kChannelBytes;
        // 2-bit: the 4 channels' codes are 32 contiguous bytes (word t of a channel is m-tile t's).
        uint4 two_bit[2];
        if constexpr (kBits == 2) {
          two_bit[0] = *reinterpret_cast<const uint4*>(codes);
          two_bit[1] = *reinterpret_cast<const uint4*>(codes + 16);
        }
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          // The word of each of the thread's 4 channels holding this m-tile's rows 2g, 2g + 1.
          uint32_t w[4];
          if constexpr (kBits == 2) {
            w[0] = t == 0 ? two_bit[0].x : two_bit[0].y;
            w[1] = t == 0 ? two_bit[0].z : two_bit[0].w;
            w[2] = t == 0 ? two_bit[1].x : two_bit[1].y;
            w[3] = t == 0 ? two_bit[1].z : two_bit[1].w;
          } else {
            const int word = (t * kTileBits + key_bit) / 32;
#pragma unroll
            for (int c = 0; c < 4; ++c)
              w[c] = *reinterpret_cast<const uint32_t*>(codes + c * S::kChannelBytes + 4 * word);
          }
          const int byte = key_byte % 4;
          const uint32_t t01 = pair_bytes(w[0], w[1], byte);
          const uint32_t t23 = pair_bytes(w[2], w[3], byte);
          const uint32_t a[4] = {codes_with_offset(t01, mask_lo, magic), codes_with_offset(t01, mask_hi, magic),
                                 codes_with_offset(t23, mask_lo, magic), codes_with_offset(t23, mask_hi, magic)};
          mma_16816(s[t], a, qs0, qs1);
        }
      }
      // Scores: (raw - 1024 sum_c q'_c) 2^-sh + sum_c q_c m_c, scaled; rows g: the low codes'
      // weight, g + 8: the high's. No mask: a sealed step is a whole group before sealed_end.
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float w = key_weight[e / 2];
        const float shift = fmaf(bias[e], score_scale, -kCodeOffset * w * q_sum[e]);
        s[0][e] = fmaf(s[0][e], w, shift);
        s[1][e] = fmaf(s[1][e], w, shift);
      }
      uint32_t b[2][2];
      float alpha[2];
      softmax_step<2, kHeadDim>(s, head_max, head_sum, o, b, alpha);
      correction[0] *= alpha[0];
      correction[1] *= alpha[1];

      // O^T += (offset + codes)^T P'^T per m-tile t and value group G: its k-slots 2q, 2q + 1,
      // 2q + 8, 2q + 9 are rows 4q, 4q + 2, 4q + 1, 4q + 3 of the tile (the row order above).
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const int key_rows[4] = {16 * t + 4 * q, 16 * t + 4 * q + 2, 16 * t + 4 * q + 1, 16 * t + 4 * q + 3};
        const unsigned char* row[4];
        uint32_t scale_words[4][S::kGroups / 2];
        uint32_t minimum[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          row[r] = v_raw + key_rows[r] * S::kValueRowBytes;
          // A row's scales: 8 bytes (head dim 128) or 4 (64), one load.
          if constexpr (S::kGroups == 4) {
            const uint2 sc = *reinterpret_cast<const uint2*>(row[r] + S::kValueCodeBytes);
            scale_words[r][0] = sc.x;
            scale_words[r][1] = sc.y;
          } else {
            scale_words[r][0] = *reinterpret_cast<const uint32_t*>(row[r] + S::kValueCodeBytes);
          }
          minimum[r] = *reinterpret_cast<const uint16_t*>(row[r] + minimum_offset);
        }
        // sum_k P m_G: rows 4 + G of the correction (minimum_row threads hold group g - 4).
        {
          const uint32_t lo = minimum_row ? minimum[0] | minimum[1] << 16 : 0u;
          const uint32_t hi = minimum_row ? minimum[2] | minimum[3] << 16 : 0u;
          const uint32_t a[4] = {lo, 0u, hi, 0u};
          mma_16816(correction, a, b[t][0], b[t][1]);
        }
#pragma unroll
        for (int G = 0; G < S::kGroups; ++G) {
          // P'_G: P^T's B fragments times the group's scales of the same keys.
          uint32_t pb[2];
#pragma unroll
          for (int p = 0; p < 2; ++p) {
            const __half2 scale =
                as_half2(pair_halves(scale_words[2 * p][G / 2], scale_words[2 * p + 1][G / 2], G % 2));
            pb[p] = as_bits(__hmul2(as_half2(b[t][p]), scale));
          }
          // The thread's dims 32G + 4g .. + 3 of each key: kDimBytes bytes from bit (32G + 4g) bits.
          const int first_byte = (32 * G + 4 * g) * kBits / 8;
          uint32_t cw[4];
#pragma unroll
          for (int r = 0; r < 4; ++r) cw[r] = *reinterpret_cast<const uint32_t*>(row[r] + (first_byte & ~3));
          // v[p][i]: dim i of the key pair p (rows r = 2p, 2p + 1), as offset + code.
          uint32_t v[2][4];
#pragma unroll
          for (int p = 0; p < 2; ++p) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              const int byte = (first_byte & 3) + (i * kBits) / 8;
              const uint32_t pair = pair_bytes(cw[2 * p], cw[2 * p + 1], byte);
              if constexpr (kBits == 2) {
                v[p][i] = i == 0   ? codes_with_offset<2, 0>(pair, magic)
                          : i == 1 ? codes_with_offset<2, 2>(pair, magic)
                          : i == 2 ? codes_with_offset<2, 4>(pair, magic)
                                   : codes_with_offset<2, 6>(pair, magic);
              } else {
                v[p][i] = i % 2 == 0 ? codes_with_offset<4, 0>(pair, magic) : codes_with_offset<4, 4>(pair, magic);
              }
            }
          }
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const uint32_t a[4] = {v[0][2 * h], v[0][2 * h + 1], v[1][2 * h], v[1][2 * h + 1]};
            mma_16816(o[2 * G + h], a, pb[0], pb[1]);
          }
          // sum_k P'_G: row G of the correction.
          const uint32_t one = g == G ? kOnes : 0u;
          const uint32_t a[4] = {one, 0u, one, 0u};
          mma_16816(correction, a, pb[0], pb[1]);
        }
      }
    }
    // The values' offsets and minima: output row (dim 32G + 4g + i, i = 2h + r) holds
    // sum P' (1024 + code 2^sh_i): (that - 1024 sum P'_G) 2^-sh_i + sum P m_G.
#pragma unroll
    for (int G = 0; G < S::kGroups; ++G) {
      float scaled_sum[2], minimum_sum[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        scaled_sum[i] = __shfl_sync(0xffffffffu, correction[i], 4 * G + q);
        minimum_sum[i] = __shfl_sync(0xffffffffu, correction[i], 4 * (4 + G) + q);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float w = code_weight((2 * h + e / 2) * kBits % 8);
          o[2 * G + h][e] = fmaf(fmaf(-kCodeOffset, scaled_sum[e % 2], o[2 * G + h][e]), w, minimum_sum[e % 2]);
        }
    }

    // The staged keys: fp16 rows of the query's own block, 16 keys a warp step in their own order
    // (rows g, g + 8; k-slots 2q, 2q + 1, 2q + 8, 2q + 9), read from global memory.
    const size_t stride = static_cast<size_t>(cache.num_kv_heads) * kHeadDim;  // halves between staged tokens
    for (int key0 = sealed_end + warp * kWarpKeys; key0 < end; key0 += kTile) {
      const bool valid_lo = key0 + g < end;
      const bool valid_hi = key0 + g + 8 < end;
      const uint16_t* k_lo = own_k + static_cast<size_t>(key0 + g - own_start) * stride;
      float s[1][4] = {{0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
      for (int ks = 0; ks < kMBlocks; ++ks) {
        const int p = 16 * ks + 4 * q;
        const uint2 lo = valid_lo ? *reinterpret_cast<const uint2*>(k_lo + p) : make_uint2(0, 0);
        const uint2 hi = valid_hi ? *reinterpret_cast<const uint2*>(k_lo + 8 * stride + p) : make_uint2(0, 0);
        const uint32_t a[4] = {lo.x, hi.x, lo.y, hi.y};
        const uint2 qk = q_frag(ks);
        mma_16816(s[0], a, qk.x, qk.y);
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) s[0][e] = (e < 2 ? valid_lo : valid_hi) ? s[0][e] * score_scale : -INFINITY;
      uint32_t b[1][2];
      float alpha[2];
      softmax_step<1, kHeadDim>(s, head_max, head_sum, o, b, alpha);
      const int key_rows[4] = {2 * q, 2 * q + 1, 2 * q + 8, 2 * q + 9};
#pragma unroll
      for (int G = 0; G < S::kGroups; ++G) {
        uint2 w[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int pos = key0 + key_rows[r];
          w[r] = pos < end ? *reinterpret_cast<const uint2*>(own_v + static_cast<size_t>(pos - own_start) * stride +
                                                             32 * G + 4 * g)
                           : make_uint2(0, 0);
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t lo0 = h == 0 ? w[0].x : w[0].y, lo1 = h == 0 ? w[1].x : w[1].y;
          const uint32_t hi0 = h == 0 ? w[2].x : w[2].y, hi1 = h == 0 ? w[3].x : w[3].y;
          const uint32_t a[4] = {pair_halves(lo0, lo1, 0), pair_halves(lo0, lo1, 1), pair_halves(hi0, hi1, 0),
                                 pair_halves(hi0, hi1, 1)};
          mma_16816(o[2 * G + h], a, b[0][0], b[0][1]);
        }
      }
    }

    DecodeOutput out = row_out;
    out.split = split;
    finish_heads_as_n<kHeadDim>(
        smem + S::kMainBytes, args, out, head_max, head_sum, o,
        [&](int mb, int r) { return 32 * (mb / 2) + 4 * g + 2 * (mb % 2) + r; }, partial_out, partial_stats,
        gridDim.x == 1 ? smem + S::kMainBytes + merge_bytes<kHeadDim>(rows) : nullptr);
  }
}

template <int kHeadDim, KvFormat kFormat>
bool launch_for_dim(const PagedAttentionArgs& args, DecodeSplitPolicy policy, int32_t grid_splits, float* partial_out,
                    float2* partial_stats, Stream stream) {
  using S = KiviDirectShape<kHeadDim, kivi_bits(kFormat)>;
  const int rows = largest_group_tile(args.num_heads / args.cache.num_kv_heads, kHeads);
  // CTA slots by the CTA's query heads (its merge buffers' size), asked once each.
  static std::atomic<int64_t> cta_slots[kHeads + 1];  // zero: not asked yet
  if (cta_slots[rows].load(std::memory_order_relaxed) == 0) {
    cudaFuncSetAttribute(decode_kivi_direct_kernel<kHeadDim, kFormat>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(S::kMaxSmemBytes));
    cta_slots[rows].store(decode_cta_slots(decode_kivi_direct_kernel<kHeadDim, kFormat>, S::smem_bytes(rows)),
                          std::memory_order_relaxed);
  }
  const int64_t row_count = static_cast<int64_t>(args.num_heads / rows) * args.num_seqs;
  const DecodeWalk walk =
      decode_walk(row_count, grid_splits, cta_slots[rows].load(std::memory_order_relaxed), policy.ctas_per_row);
  const dim3 grid(walk.ctas_per_row, args.num_heads / rows, args.num_seqs);
  decode_kivi_direct_kernel<kHeadDim, kFormat><<<grid, kThreads, S::smem_bytes(rows), stream>>>(
      args, policy, grid_splits, walk.splits_per_cta, rows, partial_out, partial_stats);
  return walk.ctas_per_row == 1;
}

}  // namespace

template <KvFormat kFormat>
bool launch_decode_tc_kivi(const PagedAttentionArgs& args, DecodeSplitPolicy policy, int32_t grid_splits,
                           float* partial_out, float2* partial_stats, Stream stream) {
  // Sealed steps are whole 32-key groups: blocks and splits are multiples of the group.
  assert(args.cache.block_size % kKiviGroup == 0 && policy.min_split_tokens % kKiviGroup == 0);
  if (args.cache.head_dim == 64) {
    return launch_for_dim<64, kFormat>(args, policy, grid_splits, partial_out, partial_stats, stream);
  }
  return launch_for_dim<128, kFormat>(args, policy, grid_splits, partial_out, partial_stats, stream);
}

template bool launch_decode_tc_kivi<KvFormat::kKivi4>(const PagedAttentionArgs&, DecodeSplitPolicy, int32_t, float*,
                                                      float2*, Stream);
template bool launch_decode_tc_kivi<KvFormat::kKivi2>(const PagedAttentionArgs&, DecodeSplitPolicy, int32_t, float*,
                                                      float2*, Stream);

}  // namespace folio::cuda::decode
