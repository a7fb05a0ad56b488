// How CublasLtGemm picks the kernel of a product (plain C++: the executor's options carry it).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "backend/cuda/device_matrix.h"

namespace folio::cuda {

// One pinned algorithm: a weight shape and format and the bytes of its cublasLtMatmulAlgo_t
// (64, opaque). Handing an executor's choices to another one makes both compute the same bits.
struct PinnedGemmAlgo {
  WeightFormat format = WeightFormat::kBf16;
  int64_t m = 0;
  int64_t k = 0;
  std::array<uint64_t, 8> algo{};
};

struct GemmPolicy {
  // On (`--batch-invariant`): one cuBLASLt algorithm per weight shape, split-K off, used for
  // every n: a row's result does not depend on the batch it is in. Off (the default):
  // cuBLASLt's heuristic per (n, m, k), split-K included, and the GEMV at n <= 8: about twice
  // the single-stream decode speed, batch-dependent bits.
  bool batch_invariant = false;
  // Untuned pinning (tune_pinned off, or a CublasLtGemm nobody tuned): the heuristic's
  // split-free candidate pinned_candidate (0: its first choice; past the last, the last) at
  // n = pinned_rows. Benchmarks sweep both.
  int32_t pinned_rows = 512;
  int32_t pinned_candidate = 0;
  // Off the invariant policy only: n <= gemv_max_rows_* rows go to the weight-streaming GEMV
  // (gemv.h). Where it beats the alternatives, measured per weight shape of the Llama-3-8B
  // layers on the H200 (docs/BENCHMARKS.md, issue 13): BF16 at n = 1 only (at n = 2 cuBLASLt
  // is ~7% faster over a layer, at n = 8 1.8x), FP8 up to n = 2 (its E4M3 -> fp32 conversion
  // makes it compute-bound beyond, where fp8_small_gemm wins).
  bool small_batch_gemv = true;
  int32_t gemv_max_rows_bf16 = 1;
  int32_t gemv_max_rows_fp8 = 2;
  // Off the invariant policy: FP8 weights at n up to this (past the GEMV's rows) go to folio's
  // tensor-core kernel for small batches (fp8_small_gemm.h) instead of cuBLASLt; 0: never. It
  // is 1.3-1.5x faster than cuBLASLt's FP8 GEMM at n = 3-16, even with it at 32 and behind at
  // 64 (same measurements).
  int32_t fp8_small_gemm_max_rows = 32;
  // Off the invariant policy, INT4 weights (int4_gemm.h): n up to this on the small-batch
  // tensor-core kernel, which reads the 4-bit codes once (1.5-2x BF16 at n <= 16 on the
  // Llama-3-8B shapes, H200); beyond, each product first dequantizes its weight to BF16 for
  // cuBLASLt (2.5 bytes per weight more traffic than a BF16 model: 0.3-0.9x BF16 from n = 96
  // to 2048, even at 8192; docs/BENCHMARKS.md, issue 13). 0: always dequantize.
  int32_t int4_small_gemm_max_rows = 64;
  // The INT4 small GEMM in 128-column chunks where k allows (16-byte loads of 32 columns a
  // thread, int4_gemm.h), else 64-column ones (8-byte loads): the same products, in another order
  // over k. Measured on an H100 (2026-12-06, Llama-3-8B shapes): 128-column chunks are 5-14%
  // faster at n <= 8 (down equal) and 10-18% at n = 64, 5-16% slower at n = 16 and mixed between,
  // so they are taken at n <= 8 and n > 48 (int4_wide_for); false: 64-column chunks always.
  bool int4_small_gemm_wide = true;
  bool int4_wide_for(int64_t n) const { return int4_small_gemm_wide && (n <= 8 || n > 48); }
  // Act-order weights (DeviceMatrix::input_order) at up to kSmallGemmOrderedMaxRows tokens: the
  // small GEMM reads its inputs through the order itself; off, a gather kernel runs first (as
  // for larger batches).
  bool small_gemm_reads_input_order = true;
  // Act-order weights whose input a kernel of folio makes (the RMSNorm before Q|K|V and gate|up,
  // the SwiGLU / GeGLU before down): that kernel writes the input in the matrix's order
  // (DeviceMatrix::input_position), and the product reads it as a plain matrix, with no gather
  // and no scattered loads. The attention output (O's input) keeps the two ways above.
  // `folio_cuda_check --filter ordered_outputs` checks the kernels; hfsynth's act-order rows
  // measure it against FOLIO_ACT_ORDER_GATHER=1 (this off) in the same run. On the H100
  // (2026-12-06, Llama-3-8B GPTQ act-order): tg128 252.3 tok/s against 190.7 gathering (plain
  // GPTQ 279.3), but pp512 20,841 against 22,727: the kernels' scattered 2-byte stores cost more
  // than a gather's scattered loads once the batch is large. So only up to
  // inputs_written_in_order_max_rows tokens (the small GEMM's; its larger batches unmeasured).
  bool inputs_written_in_order = true;
  int32_t inputs_written_in_order_max_rows = 64;
  // INT4 (wide chunks) and INT8 weights at n <= 8 on Hopper, matrices of at least one 16-row
  // group an SM: the small GEMM's streamed kernel (grouped_streamed_gemm.cuh: one persistent
  // block an SM, weights in flight through bulk copies into shared memory) instead of one block
  // per row group with each thread's loads. Off (FOLIO_STREAMED_GEMM=0 in the executor): the
  // latter, for side-by-side runs. Measured on an H100 (2026-12-06, Llama-3-8B shape, tg128):
  // Q8_0 207 -> 250 tok/s, Q4_K_M 247 -> 293, GPTQ g128 318 -> 335, act-order unchanged
  // (docs/BENCHMARKS.md, issue 13). Alone, back to back, it is slower on the 4096- and 6144-row
  // matrices (their weights partly in L2 there, never in a real step).
  bool small_gemm_streamed = true;
  // The same for INT8 weights (int8_gemm.h: the 5- to 8-bit GGUF types).
  int32_t int8_small_gemm_max_rows = 64;
  // Off the invariant policy, on Hopper: INT4 and INT8 weights past the small kernel's rows
  // and up to this go to the GEMM that dequantizes in its main loop (grouped_wgmma_gemm.h)
  // instead of dequantizing the whole matrix for cuBLASLt; 0: never. With
  // grouped_wgmma_split_k, grids too small to fill the device split k (deterministically);
  // without, those shapes dequantize. As measured on the H100 (docs/BENCHMARKS.md, issue 13;
  // split-K as of 8eea5d0, every Llama-3-8B shape, INT4 and INT8): the main-loop GEMM takes
  // less time than dequantizing in every cell from 96 to 256 tokens (down at 96: 56.8 against
  // 106.6 us; qkv 33.4 against 46.2), and more at 512 and beyond.
  int32_t grouped_wgmma_max_rows = 256;
  bool grouped_wgmma_split_k = true;
  // Off the invariant policy, on sm_90+: the weight-streaming kernels (the INT4 / INT8 small
  // GEMM, the BF16 / FP8 GEMV) are launched as programmatic dependents of the kernel ahead
  // (programmatic_launch.cuh): they prefetch their weights into L2 while it finishes, so a decode
  // step's row ops (RMSNorm, SwiGLU, attention: ~0.7 ms of a ~3 ms GPTQ step on an H100, their
  // memory otherwise idle) overlap the next product's weight traffic. The executor sets it, on
  // where the device has it and the policy is not invariant (FOLIO_PROGRAMMATIC_LAUNCH=0 keeps it
  // off, for side-by-side runs); a CublasLtGemm made directly has it as its caller says.
  bool programmatic_launch = false;
  // Invariant policy: the executor times the split-free candidates of each weight shape at
  // n = 1, 256 and 8192 when it starts (CublasLtGemm::tune_pinned) and pins the best.
  bool tune_pinned = true;
  // Algorithms already chosen (an earlier executor's tuning): used as they are, not tuned.
  std::vector<PinnedGemmAlgo> pinned = {};
};

}  // namespace folio::cuda
