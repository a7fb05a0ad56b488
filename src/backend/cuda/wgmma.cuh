// Hopper's warpgroup matrix instructions (sm_90a), as the grouped-weight GEMM uses them: A (64
// rows x 16 k, BF16) from registers, B (N x 16 k, BF16, K-major) from shared memory in the
// 128-byte swizzled layout, FP32 accumulators in registers. Everything here compiles to nothing
// but a trap outside an sm_90a pass (FOLIO_WGMMA is 0), so the sm_80 build still links.
//
// The shared-memory layout the descriptor names: rows of 128 bytes (64 BF16 k values), 8-row
// atoms of 1,024 bytes, the 16-byte chunk c of row r stored at chunk c ^ (r % 8). The tile
// starts 1,024-byte aligned (the hardware swizzles on absolute address bits); the k16 step s of
// a row is its bytes 32s..32s+31, so a step's descriptor is the tile's advanced by 32s bytes.
#pragma once

#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FOLIO_WGMMA 1
#else
#define FOLIO_WGMMA 0
#endif

// The accumulator operands of a 64 x 128 wgmma (64 floats a thread): the placeholders %0.. in
// the instruction text and the matching "+f" operand list.
#define FOLIO_WGMMA_D64                                                                                            \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, " \
  "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define FOLIO_WGMMA_ACC64(d)                                                                                  \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), \
      "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),  \
      "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), \
      "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), \
      "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), \
      "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), \
      "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

namespace folio::cuda::wgmma {

// The byte offset of (row, byte) of a swizzled tile: what a thread that writes the tile with
// ordinary stores must compute.
__device__ __forceinline__ uint32_t swizzled_offset(uint32_t row, uint32_t byte) {
  return row * 128 + ((((byte >> 4) ^ (row & 7)) << 4) | (byte & 15));
}

// A descriptor for a K-major, 128-byte swizzled tile at shared address addr: start address,
// leading byte offset (unused by swizzled K-major layouts), stride between 8-row atoms (1,024
// bytes), layout type 1 (128-byte swizzle), all in 16-byte units.
__device__ __forceinline__ uint64_t descriptor(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3ffff) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}

__device__ __forceinline__ void fence() {
#if FOLIO_WGMMA
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void commit() {
#if FOLIO_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
template <int kPending>
__device__ __forceinline__ void wait() {
#if FOLIO_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
#endif
}
// Ordinary shared-memory stores made visible to the tensor cores' (async proxy's) reads.
__device__ __forceinline__ void fence_async_shared() {
#if FOLIO_WGMMA
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// Keeps a register live and unmoved across an asynchronous wgmma that reads or writes it: the
// compiler must not reuse an A operand's register, nor copy an accumulator, before the wait.
__device__ __forceinline__ void pin(uint32_t& r) {
  asm volatile("" : "+r"(r)::"memory");
}
__device__ __forceinline__ void pin(float& r) {
  asm volatile("" : "+f"(r)::"memory");
}

// d (64 x 128, this thread's 64 values) += a (64 x 16, this thread's 4 words) * b (128 x 16).
__device__ __forceinline__ void mma_m64n128k16(float (&d)[64], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                               uint64_t b) {
#if FOLIO_WGMMA
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{" FOLIO_WGMMA_D64
      "}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, 0;\n"
      "}\n"
      : FOLIO_WGMMA_ACC64(d)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(b), "n"(1));
#else
  (void)d, (void)a0, (void)a1, (void)a2, (void)a3, (void)b;
  __trap();
#endif
}

// A descriptor for an MN-major (transposed), 128-byte swizzled operand: rows of 128 bytes hold
// 64 consecutive N values of one k; 8-row atoms (8 k) 1,024 bytes apart along k; the next 64 N
// values (a second column of atoms) `mn_stride` bytes further.
__device__ __forceinline__ uint64_t descriptor_mn(uint32_t addr, uint32_t mn_stride) {
  return static_cast<uint64_t>((addr & 0x3ffff) >> 4) | (static_cast<uint64_t>((mn_stride >> 4) & 0x3fff) << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

// FP16 operands (the attention kernels'): the warpgroup's 64 x N accumulator is, per warp, 16
// rows laid out as mma.sync's m16n8 C fragments side by side (this thread: rows lane / 4 and
// lane / 4 + 8, columns 8 i + 2 (lane % 4) + {0, 1} in d[4 i .. 4 i + 3]).

// d (64 x 128) = a (64 x 16, FP16, K-major in shared memory) * b (128 x 16, FP16, K-major) (+ d if
// accumulate).
__device__ __forceinline__ void mma_f16_ss_m64n128k16(float (&d)[64], uint64_t a, uint64_t b, uint32_t accumulate) {
#if FOLIO_WGMMA
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{" FOLIO_WGMMA_D64
      "}, "
      "%64, %65, p, 1, 1, 0, 0;\n"
      "}\n"
      : FOLIO_WGMMA_ACC64(d)
      : "l"(a), "l"(b), "r"(accumulate));
#else
  (void)d, (void)a, (void)b, (void)accumulate;
  __trap();
#endif
}

// d (64 x 128) += a (64 x 16, FP16, this thread's 4 words) * b (16 x 128, FP16, MN-major in shared
// memory: the transposed operand, N contiguous).
__device__ __forceinline__ void mma_f16_rs_tn_m64n128k16(float (&d)[64], uint32_t a0, uint32_t a1, uint32_t a2,
                                                         uint32_t a3, uint64_t b) {
#if FOLIO_WGMMA
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{" FOLIO_WGMMA_D64
      "}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n"
      "}\n"
      : FOLIO_WGMMA_ACC64(d)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(b), "n"(1));
#else
  (void)d, (void)a0, (void)a1, (void)a2, (void)a3, (void)b;
  __trap();
#endif
}

}  // namespace folio::cuda::wgmma
