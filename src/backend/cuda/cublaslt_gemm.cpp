#include "backend/cuda/cublaslt_gemm.h"

#include <string>
#include <utility>

#include "backend/cuda/cuda_check.h"

namespace folio::cuda {
namespace {

Status lt_status(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::ok();
  return Status::error(std::string("cublasLt: ") + what + " failed with status " +
                       std::to_string(static_cast<int>(status)));
}

}  // namespace

// cuBLASLt is column-major: row-major W (m, k) is column-major (k, m), so the product is
// D (m, n) = op(A) B with A = W stored (k, m) and transposed, B = x stored (k, n), and D
// column-major (m, n) is row-major y (n, m). The "TN" layout cuBLAS favours.
struct CublasLtGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

Expected<std::unique_ptr<CublasLtGemm>> CublasLtGemm::create(size_t workspace_bytes) {
  std::unique_ptr<CublasLtGemm> gemm(new CublasLtGemm());
  if (Status s = lt_status(cublasLtCreate(&gemm->handle_), "create"); !s) return s;
  if (Status s = cuda_status(gemm->workspace_.allocate(workspace_bytes), "gemm workspace"); !s) return s;
  return Expected<std::unique_ptr<CublasLtGemm>>(std::move(gemm));
}

CublasLtGemm::~CublasLtGemm() {
  plans_.clear();
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

Expected<const CublasLtGemm::Plan*> CublasLtGemm::plan(int64_t n, int64_t m, int64_t k) {
  const auto key = std::make_tuple(n, m, k);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  auto p = std::make_unique<Plan>();
  Status s = lt_status(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
  if (!s) return s;
  const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose));
  cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof(keep));
  if (!(s = lt_status(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, k, m, k), "layout A"))) return s;
  if (!(s = lt_status(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, k, n, k), "layout B"))) return s;
  if (!(s = lt_status(cublasLtMatrixLayoutCreate(&p->d, CUDA_R_32F, m, n, m), "layout D"))) return s;

  cublasLtMatmulPreference_t preference = nullptr;
  if (!(s = lt_status(cublasLtMatmulPreferenceCreate(&preference), "preference"))) return s;
  const size_t workspace = workspace_.bytes();
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &workspace, sizeof(workspace));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle_, p->desc, p->a, p->b, p->d, p->d,
                                                               preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  if (!(s = lt_status(status, "heuristic"))) return s;
  if (found == 0) {
    return Status::error("cublasLt: no algorithm for bf16 GEMM n=" + std::to_string(n) + " m=" +
                         std::to_string(m) + " k=" + std::to_string(k));
  }
  p->algo = result.algo;
  const Plan* raw = p.get();
  plans_.emplace(key, std::move(p));
  return raw;
}

Status CublasLtGemm::prepare(int64_t n, int64_t m, int64_t k) {
  Expected<const Plan*> p = plan(n, m, k);
  return p ? Status::ok() : p.status();
}

void CublasLtGemm::matmul(const void* x, const void* w, float* y, int64_t n, int64_t m, int64_t k,
                          float beta, cudaStream_t stream) {
  Expected<const Plan*> p = plan(n, m, k);
  if (!p) cuda_fail("CublasLtGemm::plan", __FILE__, __LINE__, p.error().c_str());
  const float alpha = 1.0f;
  const cublasStatus_t status =
      cublasLtMatmul(handle_, (*p)->desc, &alpha, w, (*p)->a, x, (*p)->b, &beta, y, (*p)->d, y, (*p)->d,
                     &(*p)->algo, workspace_.get(), workspace_.bytes(), stream);
  if (status != CUBLAS_STATUS_SUCCESS) {
    cuda_fail("cublasLtMatmul", __FILE__, __LINE__, std::to_string(static_cast<int>(status)).c_str());
  }
}

}  // namespace folio::cuda
