// Sealing blocks of the residual formats on the device: a block that filled is quantized from
// its fp16 staging block into its own bytes, the bytes kv_seal_block writes on the CPU (KIVI's
// groups, kv/kivi.h; fp8's rows, kv/kv_quant.h).
//
// Grid: (max_seals, num_kv_heads); CTAs past *num_seals exit, so a captured decode graph
// launches the grid of its batch size and each replay seals only the blocks its step filled.
// A CTA quantizes one head of one block. KIVI: first the keys (a thread per (token group,
// channel): 32 tokens of one channel), then the values (a thread per (token, channel group): 32
// channels of one row). fp8: a warp per row of K or V (absmax, scale, bytes), as rope_write_kv
// quantizes the rows of a format without a residual. Sealing happens once per block_size tokens
// of a sequence, so these kernels are written to be plainly the CPU's arithmetic, not to be fast.
#include <cassert>

#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/kernels/kernels.h"
#include "backend/cuda/kernels/kivi.cuh"
#include "backend/cuda/kernels/kv_quant.cuh"

namespace folio::cuda {
namespace {

using namespace detail;

constexpr int kSealThreads = 128;

template <int kBits>
__global__ void __launch_bounds__(kSealThreads)
    kivi_seal_kernel(const KvLayerView cache, const int32_t* seals, const int32_t* num_seals) {
  const int seal = blockIdx.x;
  if (seal >= *num_seals) return;
  const int head = blockIdx.y;
  const int32_t block = seals[2 * seal];
  const int32_t staging = seals[2 * seal + 1];
  const int d = cache.head_dim;
  const int stride = cache.num_kv_heads * d;  // halves between a staged row's tokens
  constexpr int kChannelBytes = kKiviGroup * kBits / 8;

  // Keys: channel c of token group g.
  const int key_units = cache.block_size / kKiviGroup * d;
  for (int u = threadIdx.x; u < key_units; u += kSealThreads) {
    const int group = u / d;
    const int c = u % d;
    const uint16_t* x = cache.staging_row(0, staging, group * kKiviGroup, head) + c;
    uint16_t scale, minimum;
    const KiviPacked32 packed = kivi_quantize32<kBits>(x, stride, &scale, &minimum);
    uint8_t* base = cache.k + cache.kivi_key_group_offset(block, head, group);
    uint32_t* codes = reinterpret_cast<uint32_t*>(base + static_cast<size_t>(c) * kChannelBytes);
#pragma unroll
    for (int w = 0; w < kChannelBytes / 4; ++w) codes[w] = packed.word[w];
    uint16_t* scales = reinterpret_cast<uint16_t*>(base + static_cast<size_t>(d) * kChannelBytes);
    scales[c] = scale;
    scales[d + c] = minimum;
  }
  // Values: channel group g of token t.
  const int groups_per_row = d / kKiviGroup;
  const int value_units = cache.block_size * groups_per_row;
  for (int u = threadIdx.x; u < value_units; u += kSealThreads) {
    const int t = u / groups_per_row;
    const int g = u % groups_per_row;
    const uint16_t* x = cache.staging_row(1, staging, t, head) + g * kKiviGroup;
    uint16_t scale, minimum;
    const KiviPacked32 packed = kivi_quantize32<kBits>(x, 1, &scale, &minimum);
    uint8_t* base = cache.v + cache.kivi_value_row_offset(block, t, head);
    // Rows are 8-byte aligned (kv_row_bytes is a multiple of 8 for head_dim % 32 == 0).
    uint32_t* codes = reinterpret_cast<uint32_t*>(base + static_cast<size_t>(g) * kChannelBytes);
#pragma unroll
    for (int w = 0; w < kChannelBytes / 4; ++w) codes[w] = packed.word[w];
    uint16_t* scales = reinterpret_cast<uint16_t*>(base + static_cast<size_t>(d) * kBits / 8);
    scales[g] = scale;
    scales[groups_per_row + g] = minimum;
  }
}

__global__ void __launch_bounds__(kSealThreads)
    row_seal_kernel(const KvLayerView cache, const int32_t* seals, const int32_t* num_seals) {
  const int seal = blockIdx.x;
  if (seal >= *num_seals) return;
  const int head = blockIdx.y;
  const int32_t block = seals[2 * seal];
  const int32_t staging = seals[2 * seal + 1];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int r = warp; r < 2 * cache.block_size; r += kSealThreads / 32) {
    const int which = r / cache.block_size;  // K rows, then V rows
    const int t = r % cache.block_size;
    const uint16_t* x = cache.staging_row(which, staging, t, head);
    warp_store_row(cache, which == 0 ? cache.k : cache.v, static_cast<int64_t>(block) * cache.block_size + t, head,
                   lane, [&](int d) { return half_bits_to_float(x[d]); });
  }
}

}  // namespace

void kv_seal_blocks(const KvLayerView& cache, const int32_t* seals, const int32_t* num_seals, int32_t max_seals,
                    Stream stream) {
  assert(kv_format_has_residual(cache.format));
  if (max_seals <= 0) return;
  const dim3 grid(max_seals, cache.num_kv_heads);
  if (!kv_format_is_kivi(cache.format)) {
    row_seal_kernel<<<grid, kSealThreads, 0, stream>>>(cache, seals, num_seals);
    return;
  }
  assert(cache.block_size % kKiviGroup == 0 && cache.head_dim % kKiviGroup == 0);
  if (cache.format == KvFormat::kKivi2) {
    kivi_seal_kernel<2><<<grid, kSealThreads, 0, stream>>>(cache, seals, num_seals);
  } else {
    kivi_seal_kernel<4><<<grid, kSealThreads, 0, stream>>>(cache, seals, num_seals);
  }
}

}  // namespace folio::cuda
