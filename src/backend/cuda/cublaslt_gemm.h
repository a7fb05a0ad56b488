// The model's matrix products through cuBLASLt: y = x W^T (+ beta y), BF16 inputs, FP32
// accumulation and FP32 output, so the residual stream stays FP32. The algorithm for each
// shape is chosen once by cuBLASLt's heuristic and cached with its descriptors; a workspace
// is allocated once, so a call allocates nothing and can be captured in a CUDA graph.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "backend/cuda/device_buffer.h"
#include "core/status.h"

namespace folio::cuda {

class CublasLtGemm {
 public:
  static Expected<std::unique_ptr<CublasLtGemm>> create(size_t workspace_bytes = size_t{32} << 20);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // y = x W^T + beta * y.  x: (n, k) bf16 row-major; w: (m, k) bf16 row-major (a weight's
  // rows are output features); y: (n, m) fp32. beta 1 adds the product into y (the residual).
  void matmul(const void* x, const void* w, float* y, int64_t n, int64_t m, int64_t k,
              float beta, cudaStream_t stream);

  // Picks and caches the algorithm for a shape ahead of time (before graph capture).
  Status prepare(int64_t n, int64_t m, int64_t k);

 private:
  struct Plan;
  CublasLtGemm() = default;
  Expected<const Plan*> plan(int64_t n, int64_t m, int64_t k);

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::unique_ptr<Plan>> plans_;
};

}  // namespace folio::cuda
