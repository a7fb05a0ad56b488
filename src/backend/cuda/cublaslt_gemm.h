// The model's matrix products through cuBLASLt: y = x W^T (+ beta y), FP32 accumulation and
// FP32 output, so the residual stream stays FP32. Weights in BF16 take BF16 activations; FP8
// weights (device_matrix.h) take the activations quantized to E4M3 per token on the fly
// (fp8_rows.h), and the FP8 tensor cores apply both scale vectors (cuBLASLt's outer-vector
// scaling: element (i, j) times w_scale[i] * x_scale[j]). INT4 and INT8 weights (W4A16, W8A16)
// go to folio's tensor-core kernels for small n and are dequantized to BF16 for cuBLASLt beyond
// (int4_gemm.h, int8_gemm.h). Descriptors are cached per
// shape; a workspace is allocated once, so a call allocates nothing and can be captured in a
// CUDA graph.
//
// Algorithms, two policies:
//   - per shape (the default): cuBLASLt's heuristic for every (n, m, k), split-K included, and
//     the smallest n on the weight-streaming GEMV (gemv.h) when policy.small_batch_gemv; fast at small
//     n (decode), but a row's bits depend on n.
//   - batch invariant: one algorithm per weight shape (m, k), split-K off (SPLITK_NUM 1,
//     reduction scheme none), used for every n. A fixed tile with no split of k computes each
//     output element by the same sequence of MMAs whatever n is, so a row's result does not
//     depend on the batch it is in (the engine's outputs do not change with load). Which
//     algorithm: tune_pinned's timed choice, else the policy's pinned list, else the
//     heuristic's split-free candidate at n = pinned_rows.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/gemm_policy.h"
#include "core/status.h"

namespace folio::cuda {

// What tune_pinned measured for one weight shape, for logs.
struct PinnedTuning {
  WeightFormat format = WeightFormat::kBf16;
  int64_t m = 0, k = 0;
  int32_t candidates = 0;             // split-free algorithms timed (after removing duplicates)
  int32_t num_rows = 0;               // entries of rows / chosen_us / best_us
  std::array<int64_t, 3> rows{};      // n of each timing
  std::array<double, 3> chosen_us{};  // the pinned algorithm at each n
  std::array<double, 3> best_us{};    // the fastest candidate at each n (may differ per n)
  double seconds = 0.0;               // the tuning's wall time
  bool reused = false;                // already pinned (the policy's list): nothing timed
  std::string algorithm;              // the chosen one: "id .. tile .. stages .. cluster .."
};

class CublasLtGemm {
 public:
  static Expected<std::unique_ptr<CublasLtGemm>> create(size_t workspace_bytes = size_t{32} << 20,
                                                        const GemmPolicy& policy = {});
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // y = x W^T + beta * y.  x: (n, k) bf16 row-major; w: (m, k) bf16 row-major (a weight's
  // rows are output features); y: (n, m) fp32. beta 1 adds the product into y (the residual).
  void matmul(const void* x, const void* w, float* y, int64_t n, int64_t m, int64_t k, float beta, cudaStream_t stream);
  // The same for a weight in any format; FP8 needs reserve_fp8_activations first.
  void matmul(const void* x, const DeviceMatrix& w, float* y, int64_t n, int64_t m, int64_t k, float beta,
              cudaStream_t stream);
  // FP8 weights: the E4M3 copy of the activations (max_rows, max_k) and their scales, allocated
  // once so that matmul allocates nothing.
  Status reserve_fp8_activations(int64_t max_rows, int64_t max_k);
  // INT4 / INT8 weights: the BF16 copy of the largest matrix (max_elems = rows * cols) that
  // products past the small GEMMs dequantize into (int4_gemm.h, int8_gemm.h).
  Status reserve_dequantize_scratch(int64_t max_elems);
  // Act-order INT4 / INT8 weights (DeviceMatrix::input_order): the (max_rows, max_k) BF16
  // copy of the activations gathered into a matrix's input order.
  Status reserve_input_gather(int64_t max_rows, int64_t max_k);

  // Picks and caches the algorithm for a shape ahead of time (before graph capture).
  Status prepare(int64_t n, int64_t m, int64_t k, WeightFormat format = WeightFormat::kBf16);

  // Batch-invariant policy: pins the algorithm of weight shape (m, k) by timing cuBLASLt's
  // split-free candidates (the heuristic's, at n = 1, 256 and 8192, deduplicated) at those n
  // (capped at max_n), and choosing the least weighted sum over n of time / fastest
  // candidate's time (weight 1, 2 for n >= 4096: relative slowdowns count, not absolute
  // times); among candidates within 3% of that, the first found. Runs the products on stream with x (max_n, k), w (m, k), y (max_n, m),
  // whose contents it overwrites (y) and does not care about. A shape already pinned is kept.
  // FP8 weights are timed on the E4M3 activation buffer (reserve_fp8_activations).
  Expected<PinnedTuning> tune_pinned(const void* x, const DeviceMatrix& w, float* y, int64_t max_n, int64_t m,
                                     int64_t k, float beta, cudaStream_t stream);
  // The pinned algorithms (tuned, given or picked so far), for GemmPolicy::pinned.
  std::vector<PinnedGemmAlgo> pinned_algorithms() const;

  // Switches the policy; cached plans are dropped (graphs that captured calls must be too),
  // and the pinned algorithms become the policy's list.
  void set_policy(const GemmPolicy& policy);
  const GemmPolicy& policy() const { return policy_; }
  // Shapes for which the pinned algorithm failed cuBLASLt's check and the heuristic's was used
  // instead (invariance lost for those shapes); 0 is what we expect.
  int32_t pinned_fallbacks() const { return pinned_fallbacks_; }
  // One line per pinned weight shape: the algorithm's id, tile, stages and split, for logs.
  std::string describe_pinned() const;

 private:
  struct Plan;
  CublasLtGemm() = default;
  using Shape = std::tuple<WeightFormat, int64_t, int64_t>;  // (format, m, k) of a weight
  Expected<const Plan*> plan(WeightFormat format, int64_t n, int64_t m, int64_t k);
  Expected<cublasLtMatmulAlgo_t> pinned_algo(WeightFormat format, int64_t m, int64_t k);
  // The heuristic's algorithms in its order (up to 8), with no_split only split-free ones.
  Expected<std::vector<cublasLtMatmulAlgo_t>> heuristic_results(const Plan& p, bool no_split);
  // The heuristic's first algorithm, or with no_split its candidate-th split-free one.
  Expected<cublasLtMatmulAlgo_t> heuristic_algo(const Plan& p, int64_t n, int64_t m, int64_t k, bool no_split,
                                                int32_t candidate = 0);
  // One cublasLtMatmul of plan p with algo; x is what B reads (bf16, or the E4M3 buffer).
  // w (kInt4 / kInt8, m * k within the reserve) as BF16 into dequantize_scratch_.
  void dequantize_grouped(const DeviceMatrix& w, int64_t m, int64_t k, cudaStream_t stream);
  cublasStatus_t launch(const Plan& p, const cublasLtMatmulAlgo_t& algo, const void* x, const DeviceMatrix& w, float* y,
                        float beta, cudaStream_t stream);

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  GemmPolicy policy_;
  int32_t pinned_fallbacks_ = 0;
  std::map<std::tuple<WeightFormat, int64_t, int64_t, int64_t>, std::unique_ptr<Plan>> plans_;  // (format, n, m, k)
  std::map<Shape, cublasLtMatmulAlgo_t> pinned_;
  DeviceBuffer fp8_x_;       // (max_rows, max_k) E4M3 activations
  DeviceBuffer fp8_scales_;  // (max_rows,) their per-token scales
  int64_t fp8_rows_ = 0, fp8_k_ = 0;
  DeviceBuffer dequantize_scratch_;  // (dequantize_scratch_elems_,) bf16: one dequantized INT4 / INT8 weight
  // (also the main-loop GEMM's split-K partial tiles), and that GEMM's per-tile counters
  DeviceBuffer split_counters_;
  int64_t dequantize_scratch_elems_ = 0;
  DeviceBuffer gathered_x_;  // (gather_rows_, gather_k_) bf16: reserve_input_gather
  int64_t gather_rows_ = 0, gather_k_ = 0;
};

}  // namespace folio::cuda
