// The small-batch grouped GEMM of single-stream decode on Hopper (n <= kStreamedMaxRows tokens,
// the wide INT4 and the INT8 layouts): grouped_small_gemm.cuh's math (16 weight rows as the MMA's
// M, the tokens as its N, codes dequantized in registers, 8 warps splitting k) fed by a pipeline
// of bulk copies instead of each thread's loads.
//
// Why: grouped_small_gemm.cuh's blocks each issue all their loads at once, then compute, reduce
// and exit; at n = 1 that kernel is latency-bound at 1.2-2.4 TB/s (docs/BENCHMARKS.md, issue 13:
// 70 registers keep 3 blocks an SM, each SM idles through its blocks' launch, their one memory
// round trip and their reduction). Here one block an SM stays (a persistent grid over the row
// groups, block b taking groups b, b + grid, ...) and a producer warp keeps kStages stages of
// 16 rows x up to kStageRowBytes code bytes (and their (scale, min) words) in flight through
// cp.async.bulk, the copy engine moving the bytes without registers; the 16 consumer warps
// multiply stage s while stages s + 1.. arrive. Weights are marked evict-first in L2.
//
// A stage is one row group's codes over kStageColumns columns (k is cut into such slices, the
// last one shorter) in shared memory, each row's bytes as in global memory with rows
// kStageRowBytes + 64 apart, so that rows g and g + 1 (one quarter-warp's 16-byte reads) fall in
// different halves of the banks; then the 16 rows' group words, rows 16 bytes wider than their
// words. Consumer warp w takes chunks [w c / 16, (w + 1) c / 16) of the slice's c chunks (at most
// two), reading its codes from shared memory and x from global memory (L1), x before it waits.
//
// Launched programmatically, the producer starts copying weights at once; the consumers wait for
// the kernel ahead (griddepcontrol.wait) before reading x or touching y.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "backend/cuda/bulk_copy.cuh"
#include "backend/cuda/grouped_small_gemm.cuh"
#include "backend/cuda/programmatic_launch.cuh"

namespace folio::cuda::grouped {

constexpr int kStreamedMaxRows = 8;  // one 8-token tile
constexpr int kStages = 4;
constexpr int kStageRowBytes = 2048;
constexpr int kCodeStride = kStageRowBytes + 64;
// 16 consumer warps, two chunks each of a stage: with 8 (grouped_small_gemm's count) the two
// warps a scheduler could not hide their own latencies and INT4 products stayed at ~1.6 TB/s
// (H100, 2026-12-06: docs/BENCHMARKS.md).
constexpr int kConsumers = 16;
constexpr int kThreads = (kConsumers + 1) * 32;
constexpr int kMaxChunks = 2;       // a warp's chunks of a stage: kStageRowBytes / 64 / kConsumers
constexpr int kBarrierBytes = 128;  // full[kStages], empty[kStages]
constexpr int kPartialBytes = kConsumers * kRows * 8 * 4;  // the consumers' cross-warp sums
constexpr int kProducerWarp = kConsumers;                  // the warp after the consumers
static_assert(kStageRowBytes / 64 == kConsumers * kMaxChunks);

template <class Codes>
constexpr int64_t stage_columns() {
  return int64_t{kStageRowBytes} / Codes::kChunkBytes * 4 * Codes::kColumns;
}

// Bytes between two rows' group words in a stage, and a stage's bytes.
template <class Codes>
__host__ __device__ inline int group_stride(int group_shift) {
  return static_cast<int>((stage_columns<Codes>() >> group_shift) * 4 + 16);
}
template <class Codes>
__host__ __device__ inline int stage_bytes(int group_shift) {
  return kRows * kCodeStride + kRows * group_stride<Codes>(group_shift);
}

template <class Codes, bool kOrdered>
__global__ void __launch_bounds__(kThreads, 1)
    streamed_small_gemm_kernel(const uint16_t* __restrict__ x, const uint8_t* __restrict__ codes,
                               const uint32_t* __restrict__ groups, float* __restrict__ y, int n, int64_t m, int64_t k,
                               int group_shift, float beta, const int32_t* __restrict__ order) {
  static_assert(sizeof(typename Codes::Chunk) == 16 && Codes::kChunkBytes == 64);
  constexpr int kCols = Codes::kColumns, kChunkCols = 4 * kCols;
  constexpr int64_t kSliceCols = stage_columns<Codes>();
  extern __shared__ __align__(128) uint8_t smem[];
  auto* full = reinterpret_cast<uint64_t*>(smem);
  uint64_t* empty = full + kStages;
  auto* partial = reinterpret_cast<float*>(smem + kBarrierBytes);  // [warp][row][token]
  uint8_t* stages = smem + kBarrierBytes + kPartialBytes;
  const int words_stride = group_stride<Codes>(group_shift), stage_size = stage_bytes<Codes>(group_shift);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(full + s, 1);
      mbarrier_init(empty + s, kConsumers);
    }
    mbarrier_init_fence();
  }
  __syncthreads();
  const int64_t row_groups = m / kRows, slices = (k + kSliceCols - 1) / kSliceCols;
  const int64_t row_bytes = k / kChunkCols * Codes::kChunkBytes, row_words = k >> group_shift;

  if (warp == kProducerWarp) {
    // Lane r < 16 copies row r's codes of the slice, lane 16 + r its group words.
    const uint64_t policy = evict_first_policy();
    uint32_t use = 0;
    for (int64_t rg = blockIdx.x; rg < row_groups; rg += gridDim.x) {
      for (int64_t s = 0; s < slices; ++s, ++use) {
        const int slot = static_cast<int>(use % kStages);
        if (use >= kStages) mbarrier_wait(empty + slot, (use / kStages - 1) & 1);
        const int64_t k0 = s * kSliceCols, cols = k - k0 < kSliceCols ? k - k0 : kSliceCols;
        const auto code_bytes = static_cast<uint32_t>(cols / kChunkCols * Codes::kChunkBytes);
        const auto word_bytes = static_cast<uint32_t>((cols >> group_shift) * 4);
        if (lane == 0) mbarrier_arrive_expect_tx(full + slot, kRows * (code_bytes + word_bytes));
        __syncwarp();
        uint8_t* stage = stages + slot * stage_size;
        const int r = lane % kRows;
        const int64_t row = rg * kRows + r;
        if (lane < kRows) {
          bulk_copy_to_shared(stage + r * kCodeStride, codes + row * row_bytes + k0 / kChunkCols * Codes::kChunkBytes,
                              code_bytes, full + slot, policy);
        } else {
          bulk_copy_to_shared(stage + kRows * kCodeStride + r * words_stride,
                              groups + row * row_words + (k0 >> group_shift), word_bytes, full + slot, policy);
        }
      }
    }
    return;  // the consumers' barriers below leave this warp out
  }

  wait_for_previous_kernel();
  const int g = lane / 4, t = lane % 4;
  // Tokens past n read token 0 (any valid row) and are never written.
  const uint16_t* x_row = x + static_cast<int64_t>(g < n ? g : 0) * k;
  uint32_t use = 0;
  for (int64_t rg = blockIdx.x; rg < row_groups; rg += gridDim.x) {
    float acc[2][4] = {};  // two MMA chains (a chunk's h = 0 and h = 1 halves), summed at the end
    for (int64_t s = 0; s < slices; ++s, ++use) {
      const int64_t k0 = s * kSliceCols, cols = k - k0 < kSliceCols ? k - k0 : kSliceCols;
      const int chunks = static_cast<int>(cols / kChunkCols);
      const int begin = chunks * warp / kConsumers, count = chunks * (warp + 1) / kConsumers - begin;
      // This warp's columns of x first: their loads overlap the wait for the stage.
      uint4 b[kMaxChunks][kCols / 8];
#pragma unroll
      for (int j = 0; j < kMaxChunks; ++j) {
        if (j < count) {
#pragma unroll
          for (int i = 0; i < kCols / 8; ++i) {
            b[j][i] = load_x8<kOrdered>(x_row, order, k0 + (begin + j) * kChunkCols + kCols * t + 8 * i);
          }
        }
      }
      const int slot = static_cast<int>(use % kStages);
      mbarrier_wait(full + slot, (use / kStages) & 1);
      const uint8_t* stage = stages + slot * stage_size;
      const uint8_t* lo_codes = stage + g * kCodeStride + Codes::kChunkBytes / 4 * t;
      const auto* lo_words = reinterpret_cast<const uint32_t*>(stage + kRows * kCodeStride + g * words_stride);
      const auto* hi_words = reinterpret_cast<const uint32_t*>(stage + kRows * kCodeStride + (g + 8) * words_stride);
#pragma unroll
      for (int j = 0; j < kMaxChunks; ++j) {
        if (j >= count) break;
        const int c = begin + j;
        const uint4 lo = *reinterpret_cast<const uint4*>(lo_codes + c * Codes::kChunkBytes);
        const uint4 hi = *reinterpret_cast<const uint4*>(lo_codes + 8 * kCodeStride + c * Codes::kChunkBytes);
        const int word = (c * kChunkCols + kCols * t) >> group_shift;
        uint32_t a[kCols / 8][2][4];
        Codes::dequantize(lo, hi, lo_words[word], hi_words[word], a);
#pragma unroll
        for (int i = 0; i < kCols / 8; ++i) {
          mma_bf16(acc[0], a[i][0][0], a[i][0][1], a[i][0][2], a[i][0][3], b[j][i].x, b[j][i].y);
          mma_bf16(acc[1], a[i][1][0], a[i][1][1], a[i][1][2], a[i][1][3], b[j][i].z, b[j][i].w);
        }
      }
      __syncwarp();
      if (lane == 0) mbarrier_arrive(empty + slot);
    }
    // The warps' partial sums: C slots are (row g, tokens 2t, 2t+1) and (row g + 8, same).
    float* mine = partial + warp * kRows * 8;
    mine[g * 8 + 2 * t] = acc[0][0] + acc[1][0];
    mine[g * 8 + 2 * t + 1] = acc[0][1] + acc[1][1];
    mine[(g + 8) * 8 + 2 * t] = acc[0][2] + acc[1][2];
    mine[(g + 8) * 8 + 2 * t + 1] = acc[0][3] + acc[1][3];
    named_barrier_sync<1, kConsumers * 32>();
    if (threadIdx.x < kRows * 8) {
      const int row = threadIdx.x / 8, token = threadIdx.x % 8;
      if (token < n) {
        float sum = 0.0f;
#pragma unroll
        for (int w = 0; w < kConsumers; ++w) sum += partial[(w * kRows + row) * 8 + token];
        float* out = y + static_cast<int64_t>(token) * m + rg * kRows + row;
        *out = beta == 0.0f ? sum : sum + beta * *out;
      }
    }
    named_barrier_sync<1, kConsumers * 32>();  // the sums are read before the next group's land
  }
}

// The device's SM count and whether it is sm_90+ (cached per device).
struct StreamedDevice {
  int sm_count = 0;
  bool hopper = false;
};
inline StreamedDevice streamed_device() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> sm_counts[kMaxDevices];  // 0: not asked yet; -1: not sm_90+
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) return {};
  int cached = sm_counts[device].load(std::memory_order_relaxed);
  if (cached == 0) {
    int major = 0, sms = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    cached = major >= 9 && sms > 0 ? sms : -1;
    sm_counts[device].store(cached, std::memory_order_relaxed);
  }
  return cached > 0 ? StreamedDevice{cached, true} : StreamedDevice{};
}

// Whether the streamed kernel takes this product: sm_90+, n <= kStreamedMaxRows, whole chunks,
// group words whose slices are whole 16-byte units, and at least one row group an SM (fewer
// would leave SMs without a block; the other kernel splits nothing either, but keeps its lower
// start-up cost there).
template <class Codes>
bool streamed_small_gemm_takes(int64_t n, int64_t m, int64_t k, int group_shift, const void* codes,
                               const void* groups) {
  constexpr int64_t kChunkCols = 4 * Codes::kColumns;
  const int64_t slice_words = stage_columns<Codes>() >> group_shift;
  if (n < 1 || n > kStreamedMaxRows || m % kRows != 0 || k % kChunkCols != 0) return false;
  if (slice_words < 4 || slice_words % 4 != 0 || (k >> group_shift) % 4 != 0 ||
      (k >> group_shift) << group_shift != k) {
    return false;
  }
  if (reinterpret_cast<uintptr_t>(codes) % 16 != 0 || reinterpret_cast<uintptr_t>(groups) % 16 != 0) return false;
  const StreamedDevice device = streamed_device();
  return device.hopper && m / kRows >= device.sm_count;
}

template <class Codes, bool kOrdered>
void launch_streamed(const uint16_t* x, const uint8_t* codes, const uint32_t* groups, float* y, int n, int64_t m,
                     int64_t k, int group_shift, float beta, const int32_t* order, cudaStream_t stream,
                     bool programmatic) {
  // More than the default 48 KB of dynamic shared memory needs the function's attribute raised
  // once (per device; harmless to repeat).
  static std::atomic<bool> raised[64];
  int device = 0;
  cudaGetDevice(&device);
  const auto kernel = streamed_small_gemm_kernel<Codes, kOrdered>;
  const size_t smem = kBarrierBytes + kPartialBytes + size_t{kStages} * stage_bytes<Codes>(group_shift);
  if (device < 0 || device >= 64 || !raised[device].load(std::memory_order_relaxed)) {
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         kBarrierBytes + kPartialBytes + kStages * stage_bytes<Codes>(4));
    if (device >= 0 && device < 64) raised[device].store(true, std::memory_order_relaxed);
  }
  const int64_t row_groups = m / kRows, sms = streamed_device().sm_count;
  const auto grid = static_cast<unsigned>(row_groups < sms ? row_groups : sms);
  launch_kernel(programmatic, kernel, dim3(grid), dim3(kThreads), smem, stream, x, codes, groups, y, n, m, k,
                group_shift, beta, order);
}

// The product through the streamed kernel; the caller checked streamed_small_gemm_takes.
template <class Codes>
void launch_streamed_small_gemm(const void* x, const uint8_t* codes, const uint32_t* groups, float* y, int64_t n,
                                int64_t m, int64_t k, int group_shift, float beta, cudaStream_t stream,
                                const int32_t* order, bool programmatic) {
  const auto* xs = static_cast<const uint16_t*>(x);
  if (order != nullptr) {
    launch_streamed<Codes, true>(xs, codes, groups, y, static_cast<int>(n), m, k, group_shift, beta, order, stream,
                                 programmatic);
  } else {
    launch_streamed<Codes, false>(xs, codes, groups, y, static_cast<int>(n), m, k, group_shift, beta, order, stream,
                                  programmatic);
  }
}

}  // namespace folio::cuda::grouped
