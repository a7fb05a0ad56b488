#include <cuda_bf16.h>

#include <cassert>
#include <cstdint>

#include "backend/cuda/int4_gemm.h"
#include "backend/cuda/int4_mma.cuh"
#include "backend/cuda/weight_loads.cuh"

namespace folio::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kRows = 16;   // weight rows a block computes (the MMA's M)
constexpr int kChunk = 64;  // k columns one step of a warp covers (four m16n8k16)

// Lane (g = lane / 4, t = lane % 4). In m16n8k16 a thread's A slots are rows g, g + 8 at the
// k pairs (2t, 2t+1) (a0, a1) and (2t+8, 2t+9) (a2, a3); its B slots column g at the same pairs
// (b0, b1). Over a 64-column chunk thread t owns columns 16t..16t+15: two codes words (8 columns
// each) per row; MMA (i, h) of the chunk (word i, half h) takes the word's pairs j = 2h (a0/a1,
// b0) and 2h + 1 (a2/a3, b1), i.e. columns 16t + 8i + 4h .. + 3, which are x's 8 bytes at that
// offset. Every column of the chunk is used once.
// kGroups: 16-row groups a block computes, each warp all of them over its share of k. Two
// halve the activations' L2 traffic (re-read once per block), which is what the kernel costs
// past ~16 tokens; one keeps more blocks (and fewer registers) for the smallest batches.
template <int kTiles, int kGroups>
__global__ void __launch_bounds__(kWarps * 32)
    int4_small_gemm_kernel(const uint16_t* __restrict__ x, const uint8_t* __restrict__ codes,
                           const uint32_t* __restrict__ groups, float* __restrict__ y, int n, int64_t m, int64_t k,
                           float beta) {
  constexpr int kUnroll = kGroups == 1 ? 8 : 4;  // chunks in flight per thread before any MMA
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows * kGroups;
  const int64_t chunks = k / kChunk;
  const int64_t begin = chunks * warp / kWarps, end = chunks * (warp + 1) / kWarps;
  const int64_t row_bytes = k / 2, row_groups = k >> kInt4GroupShift;
  const uint8_t* w_lo[kGroups];
  const uint32_t* g_lo[kGroups];
#pragma unroll
  for (int q = 0; q < kGroups; ++q) {
    w_lo[q] = codes + (row0 + kRows * q + g) * row_bytes + 8 * t;  // row g of group q; + 8 rows: g + 8
    g_lo[q] = groups + (row0 + kRows * q + g) * row_groups;
  }
  // Tokens past n read token 0 (any valid row) and are never written.
  const uint16_t* x_rows[kTiles];
#pragma unroll
  for (int tile = 0; tile < kTiles; ++tile) {
    const int token = tile * 8 + g;
    x_rows[tile] = x + static_cast<int64_t>(token < n ? token : 0) * k + 16 * t;
  }
  float acc[kGroups][kTiles][4] = {};
  auto step = [&](const uint2(&lo)[kGroups], const uint2(&hi)[kGroups], int64_t c) {
    const int64_t group = (c * kChunk + 16 * t) >> kInt4GroupShift;
    uint32_t a[kGroups][2][2][4];  // (row group, word, half) -> a0..a3
#pragma unroll
    for (int q = 0; q < kGroups; ++q) {
      dequantize_fragments(lo[q], hi[q], __ldg(g_lo[q] + group), __ldg(g_lo[q] + 8 * row_groups + group), a[q]);
    }
#pragma unroll
    for (int tile = 0; tile < kTiles; ++tile) {
      const uint4* xs = reinterpret_cast<const uint4*>(x_rows[tile] + c * kChunk);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const uint4 b = __ldg(xs + i);
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
    uint2 lo[kUnroll][kGroups], hi[kUnroll][kGroups];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int q = 0; q < kGroups; ++q) {
        lo[u][q] = load_streaming8(w_lo[q] + (c + u) * (kChunk / 2));
        hi[u][q] = load_streaming8(w_lo[q] + 8 * row_bytes + (c + u) * (kChunk / 2));
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) step(lo[u], hi[u], c + u);
  }
  for (; c < end; ++c) {
    uint2 lo[kGroups], hi[kGroups];
#pragma unroll
    for (int q = 0; q < kGroups; ++q) {
      lo[q] = load_streaming8(w_lo[q] + c * (kChunk / 2));
      hi[q] = load_streaming8(w_lo[q] + 8 * row_bytes + c * (kChunk / 2));
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

template <int kTiles>
void launch(const void* x, const uint8_t* codes, const uint32_t* groups, float* y, int64_t n, int64_t m, int64_t k,
            float beta, CUstream_st* stream) {
  const auto* xs = static_cast<const uint16_t*>(x);
  const int rows = static_cast<int>(n);
  if (n > 16 && m % (2 * kRows) == 0) {
    int4_small_gemm_kernel<kTiles, 2>
        <<<static_cast<unsigned>(m / (2 * kRows)), kWarps * 32, 0, stream>>>(xs, codes, groups, y, rows, m, k, beta);
  } else {
    int4_small_gemm_kernel<kTiles, 1>
        <<<static_cast<unsigned>(m / kRows), kWarps * 32, 0, stream>>>(xs, codes, groups, y, rows, m, k, beta);
  }
}

// One thread per codes word: 8 weights, one 16-byte store.
__global__ void dequantize_int4_kernel(const uint32_t* __restrict__ codes, const uint32_t* __restrict__ groups,
                                       int64_t words, int64_t k, uint4* __restrict__ out) {
  const int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (w >= words) return;
  const int64_t row = w / (k / 8), col = (w % (k / 8)) * 8;
  const Groups gr = split(__ldg(groups + row * (k >> kInt4GroupShift) + (col >> kInt4GroupShift)));
  const uint32_t word = __ldg(codes + w);
  out[w] = make_uint4(dequantize_pair(word, 0, gr.scale, gr.min), dequantize_pair(word, 1, gr.scale, gr.min),
                      dequantize_pair(word, 2, gr.scale, gr.min), dequantize_pair(word, 3, gr.scale, gr.min));
}

}  // namespace

bool int4_small_gemm_supports(const void* x, int64_t n, int64_t m, int64_t k) {
  return n >= 1 && n <= kInt4SmallGemmMaxRows && m % kRows == 0 && k % kChunk == 0 &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

void int4_small_gemm(const void* x, const uint8_t* codes, const uint32_t* groups, float* y, int64_t n, int64_t m,
                     int64_t k, float beta, CUstream_st* stream) {
  assert(int4_small_gemm_supports(x, n, m, k));
  switch ((n + 7) / 8) {
    case 1: launch<1>(x, codes, groups, y, n, m, k, beta, stream); break;
    case 2: launch<2>(x, codes, groups, y, n, m, k, beta, stream); break;
    case 3: launch<3>(x, codes, groups, y, n, m, k, beta, stream); break;
    case 4: launch<4>(x, codes, groups, y, n, m, k, beta, stream); break;
    case 5: launch<5>(x, codes, groups, y, n, m, k, beta, stream); break;
    case 6: launch<6>(x, codes, groups, y, n, m, k, beta, stream); break;
    case 7: launch<7>(x, codes, groups, y, n, m, k, beta, stream); break;
    default: launch<8>(x, codes, groups, y, n, m, k, beta, stream); break;
  }
}

void dequantize_int4(const uint8_t* codes, const uint32_t* groups, int64_t m, int64_t k, uint16_t* out,
                     CUstream_st* stream) {
  assert(k % 32 == 0);
  const int64_t words = m * k / 8;
  constexpr int kThreads = 256;
  dequantize_int4_kernel<<<static_cast<unsigned>((words + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      reinterpret_cast<const uint32_t*>(codes), groups, words, k, reinterpret_cast<uint4*>(out));
}

}  // namespace folio::cuda
