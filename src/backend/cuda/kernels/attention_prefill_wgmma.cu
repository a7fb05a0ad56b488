// Varlen paged prefill attention on Hopper's warpgroup instructions, PrefillKernel::kWgmma
// (sm_90a, head_dim 128, fp16 caches): the algorithm is the 64-row kernel's
// (attention_prefill_rows64.cu describes it); what changes is who does what.
//
// Warp specialization: three warpgroups a CTA of 128 query rows. The producer (warpgroup 0)
// fills a 3-stage ring with 128-key K and V tiles in the 128-byte swizzled layout wgmma reads:
// its warp 0 issues bulk tensor copies (TMA, one box a cache block row through the block table;
// produce_tma, in attention_prefill_wgmma_producer.cuh with the layout and barriers) and warps
// 1-3 copy Q and the tile that reaches past the context's end with cp.async. Where a cache has
// no tensor map (block sizes the boxes do not fit; FOLIO_WGMMA_TMA=0) all four warps copy every
// tile with cp.async through a slot table (produce). The producer gives most of its registers to the consumers
// (setmaxnreg). Each consumer warpgroup owns 64 query rows: S = Q K^T is 8 wgmma m64n128k16
// with both operands in shared memory (Q's 64 rows x 128 dims, K's 128 keys x 128 dims,
// K-major), the online softmax runs on the accumulators, P is packed to fp16 in registers as
// wgmma's A operand and O += P V is 8 wgmma m64n128k16 with V read transposed (MN-major: V's
// rows of dims are the N dimension). S of tile j is issued with P V of tile j - 1, so the
// softmax of one overlaps the products of the other. The two consumer warpgroups can also take
// turns issuing (kPingPong: 5% slower with the bulk copies, so only the cp.async producer's
// default).
// A consumer releases a stage's K once its S is computed and V once its P V is.
//
// Measured on an H100 (docs/BENCHMARKS.md, 2026-12-07, every check passing): 8k causal x 4,
// 484 TFLOP/s (bulk copies, no turns), 424 (cp.async with the slot table and turns; 264-267
// before the table, when a dependent block-table load per copy starved the consumers), against
// the 128-row mma.sync kernel's 349 and torch SDPA's 643 in the same run. A persistent walk
// (FOLIO_WGMMA_PERSISTENT=1: one CTA an SM, heaviest tiles first) measured 458: opt-in only.
//
// Shared-memory tiles: [two 64-dim halves][128 rows][128 bytes], 16-byte chunk c of row r at
// chunk c ^ (r % 8) (wgmma.cuh's swizzle), each half 16 KB and 1,024-byte aligned.
// Numerics: the online softmax over 128-key tiles from key 0 (raw-score max, one FMA, then
// ex2.approx.ftz), so a row's bits depend only on its own position, query_len and context_len
// (batch invariance); a tile wholly after a warpgroup's rows is skipped (the barriers still
// counted), a partially visible one is masked.
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "backend/cuda/bulk_copy.cuh"
#include "backend/cuda/kernels/attention_prefill_common.cuh"
#include "backend/cuda/kernels/attention_prefill_wgmma_producer.cuh"
#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/kernels/kernels.h"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/wgmma.cuh"

namespace folio::cuda::prefill {
namespace {

using namespace detail;
using namespace wgmma_prefill;

#if FOLIO_WGMMA
// The online softmax of one 128-key tile's scores s (this thread's two rows) into P (fp16 A
// fragments), returning each row's factor for O.
struct RowState {
  float max[2] = {-INFINITY, -INFINITY};
  float sum[2] = {0.0f, 0.0f};
};
__device__ __forceinline__ void softmax_tile(float (&s)[64], uint32_t (&pa)[32], float (&alpha)[2], RowState& rows,
                                             float score_scale) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int n = 0; n < 16; ++n) tile_max = fmaxf(tile_max, fmaxf(s[4 * n + 2 * half], s[4 * n + 2 * half + 1]));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    // Finite: key 0 is visible to every row in tile 0, and the running max carries it.
    const float new_max = fmaxf(rows.max[half], tile_max);
    alpha[half] = exp2_ftz((rows.max[half] - new_max) * score_scale);
    rows.max[half] = new_max;
    const float neg_max_scaled = -new_max * score_scale;
    float sum = 0.0f;
#pragma unroll
    for (int n = 0; n < 16; ++n) {
      const float p0 = exp2_ftz(fmaf(s[4 * n + 2 * half], score_scale, neg_max_scaled));
      const float p1 = exp2_ftz(fmaf(s[4 * n + 2 * half + 1], score_scale, neg_max_scaled));
      sum += p0 + p1;
      // A fragment of k-step n / 2: {row lo k0-7, row hi k0-7, row lo k8-15, row hi k8-15}.
      pa[4 * (n / 2) + 2 * (n % 2) + half] = pack_half2(p0, p1);
    }
    rows.sum[half] = rows.sum[half] * alpha[half] + sum;
  }
}

// A consumer warpgroup: 64 query rows from row `wg_row0` of the CTA's tile. Tile j's S = Q K^T
// is issued together with tile j - 1's O += P V, so the softmax of S_j runs on the CUDA cores
// while the tensor cores finish P_{j-1} V_{j-1}; O is rescaled by tile j's factors after that.
// g_base and item as produce_tma's (0 outside persistent mode).
template <bool kPingPong, bool kTma>
__device__ __forceinline__ void consume(const PagedAttentionArgs& args, uint8_t* smem, const Barriers& bars, int t,
                                        int wg_row0, int head, int m0, int query_start, int query_len, int pos0,
                                        int context_len, int num_tiles, int g_base, int item) {
  const int warp = t / 32;
  const int lane = t % 32;
  const int group_row = lane / 4;
  const int quad_lane = lane % 4;
  const int wg_pos0 = pos0 + wg_row0;
  // Keys this warpgroup can see: < min(context_len, its last row's position + 1); 0 if no rows.
  const int wg_key_end = m0 + wg_row0 < query_len ? min(context_len, wg_pos0 + 64) : 0;
  const int active_tiles = (wg_key_end + kTileN - 1) / kTileN;  // a prefix of the CTA's tiles
  const int row_pos = wg_pos0 + warp * 16 + group_row;          // this thread's first row's position
  const float score_scale = args.scale * kLog2e;
  // Ping-pong (kPingPong): the two warpgroups take turns issuing their products (named barriers
  // 1 and 2), so one's softmax runs while the other's products hold the tensor cores. Each
  // warpgroup has num_tiles + 1 turns (padded when it has no rows); warpgroup 0 goes first,
  // warpgroup 1 hands the turn back after each of its turns but the last.
  const int wg = wg_row0 / 64;
  int turns = 0;
  auto my_turn = [&] {
    if constexpr (kPingPong) named_barrier_sync(1 + wg, 256);
  };
  auto their_turn = [&] {
    if constexpr (kPingPong) {
      if (wg == 0 || ++turns < num_tiles + 1) named_barrier_arrive(2 - wg, 256);
    }
  };
  if constexpr (kPingPong) {
    if (wg == 1) named_barrier_arrive(1, 256);  // warpgroup 0's first turn
  }

  const uint32_t base = shared_address(smem);
  const uint32_t q_base = base + static_cast<uint32_t>(wg_row0) * 128;
  // Tile j of this item is tile g_base + j of the CTA: its stage and phase.
  auto k_base = [&](int j) { return base + kTileBytes * (1 + 2 * ((g_base + j) % kStages)); };
  auto release = [&](uint64_t* empty, int j) {
    __syncwarp();
    if (lane == 0) mbarrier_arrive(&empty[(g_base + j) % kStages]);
  };
  auto wait_tile = [&](int j) { mbarrier_wait(&bars.full[(g_base + j) % kStages], ((g_base + j) / kStages) & 1); };
  auto issue_qk = [&](float(&s)[64], int j) {
#pragma unroll
    for (int step = 0; step < kHeadDim / 16; ++step) {
      const uint32_t half = static_cast<uint32_t>(step / 4) * kHalfBytes;
      const uint32_t k_bytes = static_cast<uint32_t>(step % 4) * 32;
      wgmma::mma_f16_ss_m64n128k16(s, wgmma::descriptor(q_base + half + k_bytes),
                                   wgmma::descriptor(k_base(j) + half + k_bytes), step > 0);
    }
    wgmma::commit();
  };
  auto issue_pv = [&](float(&o)[64], const uint32_t(&pa)[32], int j) {
    const uint32_t v_base = k_base(j) + kTileBytes;
#pragma unroll
    for (int step = 0; step < kTileN / 16; ++step) {
      wgmma::mma_f16_rs_tn_m64n128k16(o, pa[4 * step], pa[4 * step + 1], pa[4 * step + 2], pa[4 * step + 3],
                                      wgmma::descriptor_mn(v_base + static_cast<uint32_t>(step) * 2048, kHalfBytes));
    }
    wgmma::commit();
  };
  auto mask = [&](float(&s)[64], int j) {
    const int key0 = j * kTileN;
    if (key0 + kTileN - 1 <= wg_pos0 && key0 + kTileN <= context_len) return;  // every key visible
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      const int key = key0 + (i / 4) * 8 + 2 * quad_lane + (i & 1);
      const int position = row_pos + ((i & 2) ? 8 : 0);
      if (key > position || key >= context_len) s[i] = -INFINITY;
    }
  };
  auto rescale = [&](float(&o)[64], const float(&alpha)[2]) {
    if (alpha[0] == 1.0f && alpha[1] == 1.0f) return;  // x * 1.0f == x: skipping is exact
#pragma unroll
    for (int n = 0; n < 16; ++n) {
      o[4 * n] *= alpha[0];
      o[4 * n + 1] *= alpha[0];
      o[4 * n + 2] *= alpha[1];
      o[4 * n + 3] *= alpha[1];
    }
  };

  // Every warpgroup waits for each item's Q, rows or not: a parity wait that skipped a phase
  // could pass the next one early.
  if constexpr (kTma) mbarrier_wait(bars.q_full, item & 1);
  float o[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.0f;
  RowState rows;
  uint32_t pa[32];
  if (active_tiles > 0) {
    float s[64];
    float alpha[2];
    wait_tile(0);
    my_turn();
    wgmma::fence();
    issue_qk(s, 0);
    their_turn();
    wgmma::wait<0>();
    pin_all(s);
    release(bars.empty_k, 0);
    mask(s, 0);
    softmax_tile(s, pa, alpha, rows, score_scale);
  }
  // Tile j, with P_{j-1} in `p` and P_j written to `p_next` (two buffers taking turns: a copy
  // between them would define wgmma inputs inside its pipeline and serialize it).
  auto tile = [&](int j, const uint32_t(&p)[32], uint32_t(&p_next)[32]) {
    float s[64];
    float alpha[2];
    wait_tile(j);
    pin_all(o);
    my_turn();
    wgmma::fence();
    issue_qk(s, j);
    issue_pv(o, p, j - 1);
    their_turn();
    wgmma::wait<1>();  // S_j done; P_{j-1} V_{j-1} may still run
    pin_all(s);
    release(bars.empty_k, j);
    mask(s, j);
    softmax_tile(s, p_next, alpha, rows, score_scale);
    wgmma::wait<0>();
    pin_all(o);
    release(bars.empty_v, j - 1);
    rescale(o, alpha);
  };
  auto last_pv = [&](const uint32_t(&p)[32]) {
    pin_all(o);
    my_turn();
    wgmma::fence();
    issue_pv(o, p, active_tiles - 1);
    their_turn();
    wgmma::wait<0>();
    pin_all(o);
    release(bars.empty_v, active_tiles - 1);
  };
  uint32_t pb[32];
  for (int j = 1; active_tiles > 0; j += 2) {
    if (j >= active_tiles) {
      last_pv(pa);
      break;
    }
    tile(j, pa, pb);
    if (j + 1 >= active_tiles) {
      last_pv(pb);
      break;
    }
    tile(j + 1, pb, pa);
  }
  // Tiles wholly after this warpgroup's rows: counted, not read.
  for (int j = active_tiles; j < num_tiles; ++j) {
    wait_tile(j);
    my_turn();
    their_turn();
    release(bars.empty_k, j);
    release(bars.empty_v, j);
  }
  if (active_tiles == 0) {  // the turn the last P V would have taken
    my_turn();
    their_turn();
  }
  if constexpr (kTma) {  // Q read: the next item's may come
    __syncwarp();
    if (lane == 0) mbarrier_arrive(bars.q_empty);
  }

#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float sum = rows.sum[half];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = 1.0f / sum;
    const int row = wg_row0 + warp * 16 + group_row + half * 8;
    if (m0 + row >= query_len) continue;
    uint16_t* dst = args.out + (static_cast<size_t>(query_start + m0 + row) * args.num_heads + head) * kHeadDim;
#pragma unroll
    for (int n = 0; n < 16; ++n) {
      *reinterpret_cast<uint32_t*>(dst + n * 8 + 2 * quad_lane) =
          pack_bf162(o[4 * n + 2 * half] * inv, o[4 * n + 2 * half + 1] * inv);
    }
  }
}

// A work item: the CTA tile of 128 query rows from m0 of one head of one sequence.
struct Item {
  int head, seq, m0, query_start, query_len, context_len, pos0, kv_end, num_tiles;
};
// False where the tile has no rows (past the sequence's prompt, or a decode row left to the
// decode kernel).
__device__ __forceinline__ bool item_of(const PagedAttentionArgs& args, bool skip_single_query, int head, int seq,
                                        int tile, Item& it) {
  it.head = head;
  it.seq = seq;
  it.query_start = args.cu_query_starts[seq];
  it.query_len = args.cu_query_starts[seq + 1] - it.query_start;
  it.m0 = tile * kBlockM;
  if (it.m0 >= it.query_len || (skip_single_query && it.query_len == 1)) return false;
  it.context_len = args.context_lens[seq];
  it.pos0 = it.context_len - it.query_len + it.m0;
  it.kv_end = min(it.context_len, it.pos0 + kBlockM);
  it.num_tiles = (it.kv_end + kTileN - 1) / kTileN;
  return true;
}

#endif  // FOLIO_WGMMA

// kPersistent (bulk copies only): one CTA an SM walks the items in the grid's order (heaviest
// causal tiles first) with a stride of the grid, its barriers' stages and phases running on
// from item to item, so no SM idles while a wave's last long tiles finish.
template <bool kPingPong, bool kTma, bool kPersistent>
__global__ void __launch_bounds__(kThreads, 1)
    prefill_wgmma_kernel(const PagedAttentionArgs args, bool skip_single_query,
                         const __grid_constant__ KvTensorMaps maps) {
#if FOLIO_WGMMA
  static_assert(kTma || !kPersistent, "the persistent walk needs the bulk-copy producer");
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (shared_address(smem_raw) & 1023)) & 1023);

  uint64_t* barrier_words = reinterpret_cast<uint64_t*>(smem + kBarrierOffset);
  const Barriers bars{barrier_words, barrier_words + kStages, barrier_words + 2 * kStages, barrier_words + 3 * kStages,
                      barrier_words + 3 * kStages + 1};
  const int tid = threadIdx.x;
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&bars.full[s], kTma ? 1 : kFullArrivals);  // kTma: warp 0's lane 0 (+ bytes)
      mbarrier_init(&bars.empty_k[s], kEmptyArrivals);
      mbarrier_init(&bars.empty_v[s], kEmptyArrivals);
    }
    mbarrier_init(bars.q_full, kQArrivals);
    mbarrier_init(bars.q_empty, kEmptyArrivals);
    mbarrier_init_fence();
  }
  __syncthreads();

  const int tiles_z = (args.max_query_len + kBlockM - 1) / kBlockM;
  const int items = kPersistent ? args.num_heads * args.num_seqs * tiles_z : 1;
  const int first = kPersistent ? static_cast<int>(blockIdx.x) : 0;
  const int stride = kPersistent ? static_cast<int>(gridDim.x) : 1;
  auto item_at = [&](int w, Item& it) {
    if constexpr (!kPersistent) {
      return item_of(args, skip_single_query, blockIdx.x, blockIdx.y, gridDim.z - 1 - blockIdx.z, it);
    }
    const int rest = w / args.num_heads;
    return item_of(args, skip_single_query, w % args.num_heads, rest % args.num_seqs,
                   tiles_z - 1 - rest / args.num_seqs, it);
  };
  const int warpgroup = tid / 128;
  int g_base = 0, item = 0;  // tiles and items this CTA has had
  if (warpgroup == 0) {
    registers_down<40>();
    for (int w = first; w < items; w += stride) {
      Item it;
      if (!item_at(w, it)) continue;
      if constexpr (kTma) {
        produce_tma(args, maps, smem, bars, tid, it.head, it.seq, it.m0, it.query_start, it.query_len, it.kv_end,
                    it.num_tiles, g_base, item);
      } else {
        produce(args, smem, bars, tid, it.head, it.seq, it.m0, it.query_start, it.query_len, it.kv_end, it.num_tiles);
      }
      g_base += it.num_tiles;
      ++item;
    }
  } else {
    registers_up<232>();
    for (int w = first; w < items; w += stride) {
      Item it;
      if (!item_at(w, it)) continue;
      consume<kPingPong, kTma>(args, smem, bars, tid % 128, 64 * (warpgroup - 1), it.head, it.m0, it.query_start,
                               it.query_len, it.pos0, it.context_len, it.num_tiles, g_base, item);
      g_base += it.num_tiles;
      ++item;
    }
  }
#else
  (void)args, (void)skip_single_query, (void)maps;
  __trap();
#endif
}

}  // namespace

bool prefill_wgmma_supported(const PagedAttentionArgs& args) {
  static const bool hopper = [] {
    int device = 0, major = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    return major == 9;
  }();
  return hopper && args.cache.head_dim == kHeadDim && args.cache.format == KvFormat::kFp16;
}

namespace {

// Whether the bulk tensor copies can read this cache: boxes of whole block rows (or 128-row
// parts of larger blocks) a multiple of 8 rows, the 128-byte swizzle's period.
bool tma_block_size(int32_t block_size) {
  if (block_size % 8 != 0) return false;
  return block_size <= 128 ? 128 % block_size == 0 : block_size % 128 == 0;
}

// The layer's K and V maps, encoded once per cache (a layer's pointers do not move while the
// pool lives; a new pool at the same address with another shape is encoded again).
bool kv_tensor_maps(const KvLayerView& cache, KvTensorMaps* maps) {
  struct Entry {
    const void* v;
    int32_t num_blocks, block_size, num_kv_heads;
    KvTensorMaps maps;
  };
  static thread_local std::unordered_map<const void*, Entry> cached;  // by K's address
  auto it = cached.find(cache.k);
  if (it != cached.end() && it->second.v == cache.v && it->second.num_blocks == cache.num_blocks &&
      it->second.block_size == cache.block_size && it->second.num_kv_heads == cache.num_kv_heads) {
    *maps = it->second.maps;
    return true;
  }
  Entry entry{cache.v, cache.num_blocks, cache.block_size, cache.num_kv_heads, {}};
  const int64_t slots = static_cast<int64_t>(cache.num_blocks) * cache.block_size;
  const int32_t rows = cache.block_size < kTileN ? cache.block_size : kTileN;
  if (!encode_paged_rows_map(&entry.maps.k, cache.k, slots, cache.num_kv_heads, kHeadDim, 64, rows) ||
      !encode_paged_rows_map(&entry.maps.v, cache.v, slots, cache.num_kv_heads, kHeadDim, 64, rows)) {
    return false;
  }
  cached[cache.k] = entry;
  *maps = entry.maps;
  return true;
}

template <bool kPingPong, bool kTma, bool kPersistent = false>
void launch(const PagedAttentionArgs& args, bool skip_single_query, const KvTensorMaps& maps, Stream stream) {
  static const bool attribute_set = [] {
    cudaFuncSetAttribute(prefill_wgmma_kernel<kPingPong, kTma, kPersistent>,
                         cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmemBytes));
    return true;
  }();
  (void)attribute_set;
  const int tiles_z = (args.max_query_len + kBlockM - 1) / kBlockM;
  dim3 grid(args.num_heads, args.num_seqs, tiles_z);
  if constexpr (kPersistent) {
    static const int sms = [] {
      int device = 0, count = 0;
      cudaGetDevice(&device);
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
      return count;
    }();
    const long long items = static_cast<long long>(args.num_heads) * args.num_seqs * tiles_z;
    grid = dim3(static_cast<unsigned>(items < sms ? items : sms));
  }
  prefill_wgmma_kernel<kPingPong, kTma, kPersistent>
      <<<grid, kThreads, kSmemBytes, stream>>>(args, skip_single_query, maps);
}

}  // namespace

void launch_prefill_wgmma(const PagedAttentionArgs& args, bool skip_single_query, Stream stream) {
  // A/B knobs (measurement only). The defaults are the fastest variants (2026-12-07, H100, 8k x
  // 4, every variant's checks passing): bulk tensor copies without turns, 484 TFLOP/s (458 with
  // turns); where a cache has no tensor map, or FOLIO_WGMMA_TMA=0, the cp.async producer with
  // turns, 424. FOLIO_WGMMA_PINGPONG=0 or 1 forces the turns off or on.
  static const int ping_pong_forced = [] {
    const char* v = std::getenv("FOLIO_WGMMA_PINGPONG");
    return v == nullptr ? -1 : *v == '1' ? 1 : 0;
  }();
  static const bool tma_allowed = [] {
    const char* v = std::getenv("FOLIO_WGMMA_TMA");
    return v == nullptr || *v != '0';
  }();
  // FOLIO_WGMMA_PERSISTENT=1: one CTA an SM walking the tiles (with the bulk copies only).
  static const bool persistent = [] {
    const char* v = std::getenv("FOLIO_WGMMA_PERSISTENT");
    return v != nullptr && *v == '1';
  }();
  KvTensorMaps maps{};
  const bool tma = tma_allowed && tma_block_size(args.cache.block_size) && kv_tensor_maps(args.cache, &maps);
  const bool ping_pong = ping_pong_forced < 0 ? !tma : ping_pong_forced == 1;
  if (tma && persistent) {
    ping_pong ? launch<true, true, true>(args, skip_single_query, maps, stream)
              : launch<false, true, true>(args, skip_single_query, maps, stream);
  } else if (tma) {
    ping_pong ? launch<true, true>(args, skip_single_query, maps, stream)
              : launch<false, true>(args, skip_single_query, maps, stream);
  } else {
    ping_pong ? launch<true, false>(args, skip_single_query, maps, stream)
              : launch<false, false>(args, skip_single_query, maps, stream);
  }
}

}  // namespace folio::cuda::prefill
