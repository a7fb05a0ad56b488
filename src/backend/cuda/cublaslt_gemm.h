// The model's matrix products through cuBLASLt: y = x W^T (+ beta y), BF16 inputs, FP32
// accumulation and FP32 output, so the residual stream stays FP32. Descriptors are cached per
// shape; a workspace is allocated once, so a call allocates nothing and can be captured in a
// CUDA graph.
//
// Algorithms, two policies:
//   - batch invariant (the default): one algorithm per weight shape (m, k), chosen once by
//     cuBLASLt's heuristic at n = pinned_rows with split-K off (SPLITK_NUM 1, reduction scheme
//     none) and used for every n. A fixed tile with no split of k computes each output element
//     by the same sequence of MMAs whatever n is, so a row's result does not depend on the
//     batch it is in (the engine's outputs do not change with load).
//   - per shape: cuBLASLt's heuristic for every (n, m, k), split-K included, and n <= 8 on the
//     weight-streaming GEMV (gemv.h) when policy.small_batch_gemv; faster at small n (decode),
//     but a row's bits depend on n.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <tuple>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/gemm_policy.h"
#include "core/status.h"

namespace folio::cuda {

class CublasLtGemm {
 public:
  static Expected<std::unique_ptr<CublasLtGemm>> create(size_t workspace_bytes = size_t{32} << 20,
                                                        const GemmPolicy& policy = {});
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // y = x W^T + beta * y.  x: (n, k) bf16 row-major; w: (m, k) bf16 row-major (a weight's
  // rows are output features); y: (n, m) fp32. beta 1 adds the product into y (the residual).
  void matmul(const void* x, const void* w, float* y, int64_t n, int64_t m, int64_t k,
              float beta, cudaStream_t stream);

  // Picks and caches the algorithm for a shape ahead of time (before graph capture).
  Status prepare(int64_t n, int64_t m, int64_t k);

  // Switches the policy; cached plans are dropped (graphs that captured calls must be too).
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
  Expected<const Plan*> plan(int64_t n, int64_t m, int64_t k);
  Expected<cublasLtMatmulAlgo_t> pinned_algo(int64_t m, int64_t k);
  // The heuristic's first algorithm, or with no_split its candidate-th split-free one.
  Expected<cublasLtMatmulAlgo_t> heuristic_algo(const Plan& p, int64_t n, int64_t m, int64_t k,
                                                bool no_split, int32_t candidate = 0);

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  GemmPolicy policy_;
  int32_t pinned_fallbacks_ = 0;
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::unique_ptr<Plan>> plans_;
  std::map<std::pair<int64_t, int64_t>, cublasLtMatmulAlgo_t> pinned_;  // (m, k) -> algorithm
};

}  // namespace folio::cuda
