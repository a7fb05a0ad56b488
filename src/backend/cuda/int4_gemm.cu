#include <cuda_bf16.h>

#include <cassert>
#include <cstdint>

#include "backend/cuda/grouped_codes.cuh"
#include "backend/cuda/grouped_small_gemm.cuh"
#include "backend/cuda/grouped_streamed_gemm.cuh"
#include "backend/cuda/int4_gemm.h"

namespace folio::cuda {
namespace {

static_assert(kSmallGemmOrderedMaxRows == grouped::kOrderedMaxRows);

// One thread per codes word: 8 weights, one 16-byte store.
__global__ void dequantize_int4_kernel(const uint32_t* __restrict__ codes, const uint32_t* __restrict__ groups,
                                       int group_shift, int64_t words, int64_t k, uint4* __restrict__ out) {
  const int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (w >= words) return;
  const int64_t row = w / (k / 8), col = (w % (k / 8)) * 8;
  const Groups gr = split(__ldg(groups + row * (k >> group_shift) + (col >> group_shift)));
  const uint32_t word = __ldg(codes + w);
  out[w] = make_uint4(dequantize_pair(word, 0, gr.scale, gr.min), dequantize_pair(word, 1, gr.scale, gr.min),
                      dequantize_pair(word, 2, gr.scale, gr.min), dequantize_pair(word, 3, gr.scale, gr.min));
}

}  // namespace

bool int4_small_gemm_supports(const void* x, int64_t n, int64_t m, int64_t k) {
  return n >= 1 && n <= kInt4SmallGemmMaxRows && m % grouped::kRows == 0 && k % grouped::kChunk == 0 &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

bool int4_small_gemm_streams(int64_t n, int64_t m, int64_t k, int group_shift, const uint8_t* codes,
                             const uint32_t* groups) {
  return grouped::streamed_small_gemm_takes<Int4WideCodes>(n, m, k, group_shift, codes, groups);
}

void int4_small_gemm(const void* x, const uint8_t* codes, const uint32_t* groups, int group_shift, float* y, int64_t n,
                     int64_t m, int64_t k, float beta, CUstream_st* stream, const int32_t* input_order, bool wide,
                     bool programmatic, bool streamed) {
  assert(int4_small_gemm_supports(x, n, m, k) && (input_order == nullptr || n <= grouped::kOrderedMaxRows));
  assert(group_shift >= 5 && k % (int64_t{1} << group_shift) == 0);
  if (streamed && wide && int4_small_gemm_streams(n, m, k, group_shift, codes, groups)) {
    grouped::launch_streamed_small_gemm<Int4WideCodes>(x, codes, groups, y, n, m, k, group_shift, beta, stream,
                                                       input_order, programmatic);
  } else if (wide && k % (4 * Int4WideCodes::kColumns) == 0) {
    grouped::launch_small_gemm<Int4WideCodes>(x, codes, groups, y, n, m, k, group_shift, beta, stream, input_order,
                                              programmatic);
  } else {
    grouped::launch_small_gemm<Int4Codes>(x, codes, groups, y, n, m, k, group_shift, beta, stream, input_order,
                                          programmatic);
  }
}

void dequantize_int4(const uint8_t* codes, const uint32_t* groups, int group_shift, int64_t m, int64_t k, uint16_t* out,
                     CUstream_st* stream) {
  assert(group_shift >= 5 && k % (int64_t{1} << group_shift) == 0);
  const int64_t words = m * k / 8;
  constexpr int kThreads = 256;
  dequantize_int4_kernel<<<static_cast<unsigned>((words + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      reinterpret_cast<const uint32_t*>(codes), groups, group_shift, words, k, reinterpret_cast<uint4*>(out));
}

}  // namespace folio::cuda
