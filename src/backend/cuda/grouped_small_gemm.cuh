// The small-batch tensor-core kernel of the grouped weight layouts (W4A16: int4_gemm.cu, W8A16:
// int8_gemm.cu), templated on how a thread's codes are loaded and dequantized (the Codes
// policy): the weights stream from memory once, are dequantized in registers and multiplied on
// the BF16 tensor cores (mma.sync m16n8k16), the weight rows as the MMA's M (16 per block) and
// the tokens as its N. No shared-memory staging: a dot product's order over k is free, so each
// thread's fragment slots take the 16 columns whose codes it loads, and the same 16 columns of
// its token rows. A block's 8 warps split k.
//
// Lane (g = lane / 4, t = lane % 4). In m16n8k16 a thread's A slots are rows g, g + 8 at the
// k pairs (2t, 2t+1) (a0, a1) and (2t+8, 2t+9) (a2, a3); its B slots column g at the same pairs
// (b0, b1). Over a 64-column chunk thread t owns columns 16t..16t+15 of rows g and g + 8; MMA
// (i, h) of the chunk takes columns 16t + 8i + 4h .. + 3: the first pair as (a0, a1) and b0,
// the second as (a2, a3) and b1, i.e. x's 8 bytes at that offset. Every column of the chunk is
// used once. Those 16 columns lie in one group of 16 or 32, so a row needs one group per chunk.
//
// Act-order weights (DeviceMatrix::input_order) at up to kOrderedMaxRows tokens: stored column
// c multiplies input order[c], and the kernel reads x through the order (8 two-byte loads in
// place of one 16-byte load, from a few KB that stay in L1) instead of a gather kernel's
// launch and round trip before it. Larger batches gather first (gather_rows.h): there the
// activations' traffic is what the kernel costs.
//
// Codes provides: kColumns (a thread's columns of a row per chunk: 16, or 32 for the wide INT4
// layout, whose chunks are then 128 columns and whose loads 16 bytes), Chunk (a thread's codes
// of one row and chunk), kChunkBytes (a row's code bytes per chunk), kUnroll1 / kUnroll2 (chunks
// in flight per thread, with one and two row groups), load(p) and dequantize(lo, hi, lo_group,
// hi_group, a) (a[i][h] = a0..a3 of MMA (i, h), i < kColumns / 8).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/programmatic_launch.cuh"
#include "backend/cuda/weight_loads.cuh"

namespace folio::cuda::grouped {

constexpr int kWarps = 8;
constexpr int kRows = 16;           // weight rows per row group (the MMA's M)
constexpr int kChunk = 64;          // k columns one step of a warp covers (four m16n8k16), kColumns 16
constexpr int kOrderedMaxRows = 8;  // one 8-token tile

// Columns col..col+7 of a token's row x (col % 8 == 0), or with an order, x[order[col..col+7]].
template <bool kOrdered>
__device__ __forceinline__ uint4 load_x8(const uint16_t* __restrict__ x, const int32_t* __restrict__ order,
                                         int64_t col) {
  if constexpr (!kOrdered) {
    return __ldg(reinterpret_cast<const uint4*>(x + col));
  } else {
    const int4 o0 = __ldg(reinterpret_cast<const int4*>(order + col));
    const int4 o1 = __ldg(reinterpret_cast<const int4*>(order + col + 4));
    auto pair = [&](int a, int b) {
      return static_cast<uint32_t>(__ldg(x + a)) | (static_cast<uint32_t>(__ldg(x + b)) << 16);
    };
    return make_uint4(pair(o0.x, o0.y), pair(o0.z, o0.w), pair(o1.x, o1.y), pair(o1.z, o1.w));
  }
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// kGroups: 16-row groups a block computes, each warp all of them over its share of k. Two
// halve the activations' L2 traffic (re-read once per block), which is what the kernel costs
// past ~16 tokens; one keeps more blocks (and fewer registers) for the smallest batches.
// group_shift: log2 of the columns per (scale, min).
// order: act-order's input order (kOrdered), else unused.
template <class Codes, int kTiles, int kGroups, bool kOrdered = false>
__global__ void __launch_bounds__(kWarps * 32)
    small_gemm_kernel(const uint16_t* __restrict__ x, const uint8_t* __restrict__ codes,
                      const uint32_t* __restrict__ groups, float* __restrict__ y, int n, int64_t m, int64_t k,
                      int group_shift, float beta, const int32_t* __restrict__ order) {
  static_assert(!kOrdered || kTiles * 8 <= kOrderedMaxRows);
  using Chunk = typename Codes::Chunk;
  constexpr int kUnroll = kGroups == 1 ? Codes::kUnroll1 : Codes::kUnroll2;
  constexpr int kCols = Codes::kColumns, kChunkCols = 4 * kCols;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows * kGroups;
  const int64_t chunks = k / kChunkCols;
  const int64_t begin = chunks * warp / kWarps, end = chunks * (warp + 1) / kWarps;
  const int64_t row_bytes = k / kChunkCols * Codes::kChunkBytes, row_groups = k >> group_shift;
  const uint8_t* w_lo[kGroups];
  const uint32_t* g_lo[kGroups];
#pragma unroll
  for (int q = 0; q < kGroups; ++q) {
    // Row g of group q (+ 8 rows: g + 8), thread t's quarter of each chunk.
    w_lo[q] = codes + (row0 + kRows * q + g) * row_bytes + Codes::kChunkBytes / 4 * t;
    g_lo[q] = groups + (row0 + kRows * q + g) * row_groups;
  }
  // Launched programmatically (programmatic_launch.cuh), the kernel ahead may still be writing
  // x or reading y: until it finishes, only this warp's codes and (scale, min) words move, into
  // L2. The words' range is widened to 16-byte bounds, which stay inside the buffer.
  if (t == 0 && end > begin) {
#pragma unroll
    for (int q = 0; q < kGroups; ++q) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int64_t row = row0 + kRows * q + g + 8 * half;
        prefetch_l2(codes + row * row_bytes + begin * Codes::kChunkBytes,
                    static_cast<uint32_t>((end - begin) * Codes::kChunkBytes));
        const int64_t first = (row * row_groups + ((begin * kChunkCols) >> group_shift)) * 4 / 16 * 16;
        const int64_t last = ((row * row_groups + ((end * kChunkCols) >> group_shift)) * 4 + 15) / 16 * 16;
        if (last > first)
          prefetch_l2(reinterpret_cast<const uint8_t*>(groups) + first, static_cast<uint32_t>(last - first));
      }
    }
  }
  wait_for_previous_kernel();
  // Tokens past n read token 0 (any valid row) and are never written.
  const uint16_t* x_rows[kTiles];
#pragma unroll
  for (int tile = 0; tile < kTiles; ++tile) {
    const int token = tile * 8 + g;
    x_rows[tile] = x + static_cast<int64_t>(token < n ? token : 0) * k;
  }
  float acc[kGroups][kTiles][4] = {};
  auto step = [&](const Chunk(&lo)[kGroups], const Chunk(&hi)[kGroups], int64_t c) {
    const int64_t group = (c * kChunkCols + kCols * t) >> group_shift;
    uint32_t a[kGroups][kCols / 8][2][4];  // (row group, i, h) -> a0..a3
#pragma unroll
    for (int q = 0; q < kGroups; ++q) {
      Codes::dequantize(lo[q], hi[q], __ldg(g_lo[q] + group), __ldg(g_lo[q] + 8 * row_groups + group), a[q]);
    }
#pragma unroll
    for (int tile = 0; tile < kTiles; ++tile) {
#pragma unroll
      for (int i = 0; i < kCols / 8; ++i) {
        const uint4 b = load_x8<kOrdered>(x_rows[tile], order, c * kChunkCols + kCols * t + 8 * i);
#pragma unroll
        for (int q = 0; q < kGroups; ++q) {
          mma_bf16(acc[q][tile], a[q][i][0][0], a[q][i][0][1], a[q][i][0][2], a[q][i][0][3], b.x, b.y);
          mma_bf16(acc[q][tile], a[q][i][1][0], a[q][i][1][1], a[q][i][1][2], a[q][i][1][3], b.z, b.w);
        }
      }
    }
  };
  int64_t c = begin;
  for (; c + kUnroll <= end; c += kUnroll) {
    Chunk lo[kUnroll][kGroups], hi[kUnroll][kGroups];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int q = 0; q < kGroups; ++q) {
        lo[u][q] = Codes::load(w_lo[q] + (c + u) * Codes::kChunkBytes);
        hi[u][q] = Codes::load(w_lo[q] + 8 * row_bytes + (c + u) * Codes::kChunkBytes);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) step(lo[u], hi[u], c + u);
  }
  for (; c < end; ++c) {
    Chunk lo[kGroups], hi[kGroups];
#pragma unroll
    for (int q = 0; q < kGroups; ++q) {
      lo[q] = Codes::load(w_lo[q] + c * Codes::kChunkBytes);
      hi[q] = Codes::load(w_lo[q] + 8 * row_bytes + c * Codes::kChunkBytes);
    }
    step(lo, hi, c);
  }

  // Sum the 8 warps' partial products, one row group at a time through the same shared memory:
  // C slots are (row g, tokens 2t, 2t+1) and (row g + 8, same).
  __shared__ float partial[kWarps][kTiles][kRows][8];
#pragma unroll
  for (int q = 0; q < kGroups; ++q) {
    if (q > 0) __syncthreads();  // the previous group's sums are read
#pragma unroll
    for (int tile = 0; tile < kTiles; ++tile) {
      partial[warp][tile][g][2 * t] = acc[q][tile][0];
      partial[warp][tile][g][2 * t + 1] = acc[q][tile][1];
      partial[warp][tile][g + 8][2 * t] = acc[q][tile][2];
      partial[warp][tile][g + 8][2 * t + 1] = acc[q][tile][3];
    }
    __syncthreads();
    for (int o = threadIdx.x; o < kTiles * kRows * 8; o += kWarps * 32) {
      const int tile = o / (kRows * 8), row = (o / 8) % kRows, col = o % 8;
      const int token = tile * 8 + col;
      if (token >= n) continue;
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) sum += partial[w][tile][row][col];
      float* out = y + static_cast<int64_t>(token) * m + row0 + kRows * q + row;
      *out = beta == 0.0f ? sum : sum + beta * *out;
    }
  }
}

// A launch for n tokens (1..64): 8-token tiles, two row groups a block past 16 tokens.
template <class Codes, int kTiles>
void launch_tiles(const void* x, const uint8_t* codes, const uint32_t* groups, float* y, int64_t n, int64_t m,
                  int64_t k, int group_shift, float beta, cudaStream_t stream, bool programmatic) {
  const auto* xs = static_cast<const uint16_t*>(x);
  const int rows = static_cast<int>(n);
  const int32_t* no_order = nullptr;
  if (n > 16 && m % (2 * kRows) == 0) {
    launch_kernel(programmatic, small_gemm_kernel<Codes, kTiles, 2>, dim3(static_cast<unsigned>(m / (2 * kRows))),
                  dim3(kWarps * 32), 0, stream, xs, codes, groups, y, rows, m, k, group_shift, beta, no_order);
  } else {
    launch_kernel(programmatic, small_gemm_kernel<Codes, kTiles, 1>, dim3(static_cast<unsigned>(m / kRows)),
                  dim3(kWarps * 32), 0, stream, xs, codes, groups, y, rows, m, k, group_shift, beta, no_order);
  }
}

// order: act-order's input order (n <= kOrderedMaxRows), or null. programmatic: launched as a
// programmatic dependent of the kernel ahead (programmatic_launch.cuh; sm_90+ only).
template <class Codes>
void launch_small_gemm(const void* x, const uint8_t* codes, const uint32_t* groups, float* y, int64_t n, int64_t m,
                       int64_t k, int group_shift, float beta, cudaStream_t stream, const int32_t* order,
                       bool programmatic) {
  if (order != nullptr) {
    launch_kernel(programmatic, small_gemm_kernel<Codes, 1, 1, true>, dim3(static_cast<unsigned>(m / kRows)),
                  dim3(kWarps * 32), 0, stream, static_cast<const uint16_t*>(x), codes, groups, y, static_cast<int>(n),
                  m, k, group_shift, beta, order);
    return;
  }
  switch ((n + 7) / 8) {
    case 1: launch_tiles<Codes, 1>(x, codes, groups, y, n, m, k, group_shift, beta, stream, programmatic); break;
    case 2: launch_tiles<Codes, 2>(x, codes, groups, y, n, m, k, group_shift, beta, stream, programmatic); break;
    case 3: launch_tiles<Codes, 3>(x, codes, groups, y, n, m, k, group_shift, beta, stream, programmatic); break;
    case 4: launch_tiles<Codes, 4>(x, codes, groups, y, n, m, k, group_shift, beta, stream, programmatic); break;
    case 5: launch_tiles<Codes, 5>(x, codes, groups, y, n, m, k, group_shift, beta, stream, programmatic); break;
    case 6: launch_tiles<Codes, 6>(x, codes, groups, y, n, m, k, group_shift, beta, stream, programmatic); break;
    case 7: launch_tiles<Codes, 7>(x, codes, groups, y, n, m, k, group_shift, beta, stream, programmatic); break;
    default: launch_tiles<Codes, 8>(x, codes, groups, y, n, m, k, group_shift, beta, stream, programmatic); break;
  }
}

}  // namespace folio::cuda::grouped
