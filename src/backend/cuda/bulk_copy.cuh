// Hopper's bulk copies (cp.async.bulk: the copy engine, not threads, moves the bytes) from
// global into shared memory, completed on an mbarrier that counts their bytes, and the mbarrier
// operations a pipeline of such copies needs. sm_90+ only: before sm_90 every helper traps, and
// the kernels that use them are not launched there (their launchers check the device).
#pragma once

#include <cuda.h>

#include <cstdint>

namespace folio::cuda {

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(count) : "memory");
}

// Between initializing barriers and their first use by the copy engine (then a __syncthreads).
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(bar)) : "memory");
}

// One arrival, and `bytes` more that the phase waits for from bulk copies.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)), "r"(bytes)
               : "memory");
}

// Until the barrier's phase of parity `parity` (0 for its first phase, then alternating) has
// completed; shared memory the phase's copies wrote is visible after it.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  const uint32_t address = shared_address(bar);
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(address), "r"(parity)
        : "memory");
  }
}

// An L2 policy for data read once (streamed weights): evicted first, so that what is reused
// (activations, the KV cache) stays.
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// bytes (a multiple of 16) from src to dst (both 16-byte aligned), counted on bar's current phase.
__device__ __forceinline__ void bulk_copy_to_shared(void* dst, const void* src, uint32_t bytes, uint64_t* bar,
                                                    uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::
          "r"(shared_address(dst)),
      "l"(src), "r"(bytes), "r"(shared_address(bar)), "l"(policy)
      : "memory");
}

// The box of a 3-D tensor map (tensor_map.h) at coordinates (c0, c1, c2), innermost first, into
// dst (aligned as the map's swizzle needs: 1,024 bytes for 128-byte rows), counted on bar's
// current phase. The map must live in parameter, constant or global memory.
__device__ __forceinline__ void tensor_copy_3d_to_shared(void* dst, const CUtensorMap* map, int c0, int c1, int c2,
                                                         uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];" ::"r"(shared_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(shared_address(bar))
      : "memory");
}

// Brings a tensor map into the copy engine's descriptor cache ahead of its first copy.
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

#else

__device__ __forceinline__ void tensor_copy_3d_to_shared(void*, const CUtensorMap*, int, int, int, uint64_t*) {
  __trap();
}
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap*) {
  __trap();
}
__device__ __forceinline__ void mbarrier_init(uint64_t*, uint32_t) {
  __trap();
}
__device__ __forceinline__ void mbarrier_init_fence() {
  __trap();
}
__device__ __forceinline__ void mbarrier_arrive(uint64_t*) {
  __trap();
}
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t*, uint32_t) {
  __trap();
}
__device__ __forceinline__ void mbarrier_wait(uint64_t*, uint32_t) {
  __trap();
}
__device__ __forceinline__ uint64_t evict_first_policy() {
  __trap();
  return 0;
}
__device__ __forceinline__ void bulk_copy_to_shared(void*, const void*, uint32_t, uint64_t*, uint64_t) {
  __trap();
}

#endif

// A barrier among the first `threads` threads of the block (a multiple of 32), leaving the
// others (a producer warp) out. id 0 is __syncthreads'.
template <int kId, int kThreads>
__device__ __forceinline__ void named_barrier_sync() {
  asm volatile("bar.sync %0, %1;" ::"n"(kId), "n"(kThreads) : "memory");
}
// The same with the barrier chosen at run time, and its arrive-only half (a thread that lets
// the others through without waiting: producer / consumer hand-offs between warpgroups).
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace folio::cuda
