#include <cuda_bf16.h>

#include <cassert>
#include <cstdint>

#include "backend/cuda/grouped_codes.cuh"
#include "backend/cuda/grouped_small_gemm.cuh"
#include "backend/cuda/grouped_streamed_gemm.cuh"
#include "backend/cuda/int8_gemm.h"

namespace folio::cuda {
namespace {

// One thread per 8 weights: an 8-byte load, one 16-byte store.
__global__ void dequantize_int8_kernel(const uint2* __restrict__ codes, const uint32_t* __restrict__ groups,
                                       int group_shift, int64_t units, int64_t k, uint4* __restrict__ out) {
  const int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (u >= units) return;
  const int64_t row = u / (k / 8), col = (u % (k / 8)) * 8;
  const uint32_t group = __ldg(groups + row * (k >> group_shift) + (col >> group_shift));
  const float scale = __uint_as_float(group << 16), min = __uint_as_float(group & 0xffff0000u);
  const uint2 word = __ldg(codes + u);
  out[u] = make_uint4(dequantize_byte_pair(word.x, 0, scale, min), dequantize_byte_pair(word.x, 2, scale, min),
                      dequantize_byte_pair(word.y, 0, scale, min), dequantize_byte_pair(word.y, 2, scale, min));
}

}  // namespace

bool int8_small_gemm_supports(const void* x, int64_t n, int64_t m, int64_t k) {
  return n >= 1 && n <= kInt8SmallGemmMaxRows && m % grouped::kRows == 0 && k % grouped::kChunk == 0 &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

bool int8_small_gemm_streams(int64_t n, int64_t m, int64_t k, int group_shift, const uint8_t* codes,
                             const uint32_t* groups) {
  return grouped::streamed_small_gemm_takes<Int8Codes>(n, m, k, group_shift, codes, groups);
}

void int8_small_gemm(const void* x, const uint8_t* codes, const uint32_t* groups, int group_shift, float* y, int64_t n,
                     int64_t m, int64_t k, float beta, CUstream_st* stream, const int32_t* input_order,
                     bool programmatic, bool streamed) {
  assert(int8_small_gemm_supports(x, n, m, k) && (group_shift == 4 || group_shift == 5));
  assert(input_order == nullptr || n <= grouped::kOrderedMaxRows);
  if (streamed && int8_small_gemm_streams(n, m, k, group_shift, codes, groups)) {
    grouped::launch_streamed_small_gemm<Int8Codes>(x, codes, groups, y, n, m, k, group_shift, beta, stream, input_order,
                                                   programmatic);
    return;
  }
  grouped::launch_small_gemm<Int8Codes>(x, codes, groups, y, n, m, k, group_shift, beta, stream, input_order,
                                        programmatic);
}

void dequantize_int8(const uint8_t* codes, const uint32_t* groups, int group_shift, int64_t m, int64_t k, uint16_t* out,
                     CUstream_st* stream) {
  assert(k % 16 == 0 && (group_shift == 4 || group_shift == 5));
  const int64_t units = m * k / 8;
  constexpr int kThreads = 256;
  dequantize_int8_kernel<<<static_cast<unsigned>((units + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      reinterpret_cast<const uint2*>(codes), groups, group_shift, units, k, reinterpret_cast<uint4*>(out));
}

}  // namespace folio::cuda
