// W4A16 / W8A16 products past the small-batch kernel's 64 tokens, on Hopper's warpgroup MMA
// (sm_90a): y = x w^T + beta y with w in a grouped layout (quant/int4_groups.h or
// quant/int8_groups.h) and x in BF16, FP32 accumulation, the weights dequantized in registers
// inside the main loop. The alternative, dequantizing the whole matrix to BF16 for cuBLASLt,
// moves 2.5 bytes a weight more than a BF16 model does (0.45-0.5x BF16 at 96-128 tokens).
//
// A block computes 128 weight rows x 128 tokens: two warpgroups of 64 rows. Each 64-column
// chunk of k goes through a shared-memory stage (five, three chunks copied ahead, all by
// 16-byte cp.async): the tokens' columns in the 128-byte swizzled layout wgmma reads B from,
// the rows' codes and their (scale, min) words. Each thread builds its A operands (its two
// rows' four k16 steps, natural k order) from the staged codes (grouped_codes.cuh,
// step_operands) while the previous chunk's MMAs run. When the tiles are too few to fill the
// device, k may be split over up to 8 blocks a tile, whose FP32 partial tiles go to a
// workspace; the last block of a tile to finish adds them in split order (deterministic for a
// given n) and writes y. Measured (H100, docs/BENCHMARKS.md, issue 13): 0.78 us a chunk and
// tile, about a third of the tensor cores' rate; split grids are slower still. GemmPolicy
// routes to it only where that beats dequantizing.
#pragma once

#include <cstddef>
#include <cstdint>

struct CUstream_st;

namespace folio::cuda {

constexpr int kGroupedWgmmaCounters = 1024;  // per-tile arrival counters the split-K path needs

// An sm_90 device (this process's current one), m % 64 == 0, k % 64 == 0, x 16-byte aligned.
bool grouped_wgmma_gemm_supports(const void* x, int64_t n, int64_t m, int64_t k);

// Whether its 128 x 128 tiles alone keep every multiprocessor busy (more than half as many
// tiles as multiprocessors), so that the product runs without splitting k.
bool grouped_wgmma_gemm_fills_device(int64_t n, int64_t m);

// code_bits: 4 (int4 layout) or 8 (int8 layout), with 2^group_shift columns a group.
// x: (n, k) bf16; y: (n, m) fp32. workspace: scratch for split-K partial tiles (splits are
// limited to what fits; none is fine); counters: kGroupedWgmmaCounters ints, zero before the
// first call, left zero by every call.
void grouped_wgmma_gemm(int code_bits, const void* x, const uint8_t* codes, const uint32_t* groups, int group_shift,
                        float* y, int64_t n, int64_t m, int64_t k, float beta, void* workspace, size_t workspace_bytes,
                        int* counters, CUstream_st* stream);

}  // namespace folio::cuda
