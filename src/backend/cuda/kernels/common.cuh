// Device helpers shared by folio's kernels: fp16/bf16 packing, warp/block reductions, and thin
// wrappers over the sm_80+ instructions the attention kernels use (cp.async, ldmatrix,
// mma.sync). Nothing here is Hopper-only, so every kernel builds for sm_80 and sm_90a alike.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace folio::cuda::detail {

constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float half_bits_to_float(uint16_t bits) {
  return __half2float(__ushort_as_half(bits));
}
__device__ __forceinline__ uint16_t float_to_half_bits(float x) {
  return __half_as_ushort(__float2half_rn(x));
}
__device__ __forceinline__ uint16_t float_to_bf16_bits(float x) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}
__device__ __forceinline__ float bf16_bits_to_float(uint16_t bits) {
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}
// Two floats -> one register of two fp16 (lo in the low half), round to nearest.
__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}
// 2^x on the MUFU, flushing denormals (the prefill kernels' softmax weights; exp2(-inf) = 0).
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ uint32_t pack_bf162(float lo, float hi) {
  return static_cast<uint32_t>(float_to_bf16_bits(lo)) | (static_cast<uint32_t>(float_to_bf16_bits(hi)) << 16);
}
// Four consecutive features (4 * i4 .. 4 * i4 + 3) of a bf16 row: one 8-byte store, or, with
// positions (an act-order reader's input order), each to its own column.
__device__ __forceinline__ void store_bf16x4(uint16_t* row, int64_t i4, float a, float b, float c, float d,
                                             const int32_t* positions) {
  if (positions == nullptr) {
    reinterpret_cast<uint2*>(row)[i4] = make_uint2(pack_bf162(a, b), pack_bf162(c, d));
    return;
  }
  const int32_t* p = positions + 4 * i4;
  row[p[0]] = float_to_bf16_bits(a);
  row[p[1]] = float_to_bf16_bits(b);
  row[p[2]] = float_to_bf16_bits(c);
  row[p[3]] = float_to_bf16_bits(d);
}
// Eight bf16 in a 16-byte vector -> eight floats (bf16 is fp32's top half).
__device__ __forceinline__ void unpack_bf16x8(const uint4& v, float (&out)[8]) {
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __uint_as_float(words[i] << 16);
    out[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
  }
}
// Eight fp16 in a 16-byte vector -> eight floats.
__device__ __forceinline__ void unpack_half8(const uint4& v, float (&out)[8]) {
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&words[i]));
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}
__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

// Sum over the block; every thread gets the result. `scratch` holds >= 32 floats; the call
// begins with a barrier so that scratch can be reused by consecutive calls.
__device__ __forceinline__ float block_sum(float x, float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int num_warps = (blockDim.x + 31) >> 5;
  x = warp_sum(x);
  __syncthreads();
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  x = lane < num_warps ? scratch[lane] : 0.0f;
  return warp_sum(x);
}

// Position -> (block, offset in block) of the paged cache without an integer division per
// lookup when block_size is a power of two (every size folio uses); any other size divides.
struct BlockIndexer {
  int size, shift;
  bool pow2;
  __device__ __forceinline__ explicit BlockIndexer(int block_size)
      : size(block_size), shift(0), pow2((block_size & (block_size - 1)) == 0) {
    while ((1 << shift) < block_size) ++shift;  // once per CTA, at most ~10 steps
  }
  __device__ __forceinline__ int block(int pos) const { return pow2 ? pos >> shift : pos / size; }
  __device__ __forceinline__ int offset(int pos) const { return pow2 ? pos & (size - 1) : pos % size; }
};

// --- sm_80+ asynchronous copies, matrix loads and tensor-core MMA ------------------------

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1; when !valid the destination is zero-filled and
// the source is not read (it may then be any address).
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(smem)), "l"(gmem), "r"(src_bytes));
}
// 8 and 4 bytes (the quantized KV caches' values and scales): .ca, the only form for these sizes.
__device__ __forceinline__ void cp_async_8(void* smem, const void* gmem, bool valid) {
  const int src_bytes = valid ? 8 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(smem_address(smem)), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_4(void* smem, const void* gmem, bool valid) {
  const int src_bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_address(smem)), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(smem)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(smem)));
}

// c += a * b: a 16x16 fp16 (row), b 16x8 fp16 (col), c 16x8 fp32.
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace folio::cuda::detail
