#include "backend/cuda/cublaslt_gemm.h"

#include <string>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemv.h"

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

Expected<std::unique_ptr<CublasLtGemm>> CublasLtGemm::create(size_t workspace_bytes, const GemmPolicy& policy) {
  std::unique_ptr<CublasLtGemm> gemm(new CublasLtGemm());
  gemm->policy_ = policy;
  if (Status s = lt_status(cublasLtCreate(&gemm->handle_), "create"); !s) return s;
  if (Status s = cuda_status(gemm->workspace_.allocate(workspace_bytes), "gemm workspace"); !s) return s;
  return Expected<std::unique_ptr<CublasLtGemm>>(std::move(gemm));
}

CublasLtGemm::~CublasLtGemm() {
  plans_.clear();
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

void CublasLtGemm::set_policy(const GemmPolicy& policy) {
  plans_.clear();
  pinned_.clear();
  pinned_fallbacks_ = 0;
  policy_ = policy;
}

namespace {

Status make_descriptors(cublasLtMatmulDesc_t& desc, cublasLtMatrixLayout_t& a, cublasLtMatrixLayout_t& b,
                        cublasLtMatrixLayout_t& d, int64_t n, int64_t m, int64_t k) {
  Status s = lt_status(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
  if (!s) return s;
  const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose));
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof(keep));
  if (!(s = lt_status(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, k, m, k), "layout A"))) return s;
  if (!(s = lt_status(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, k, n, k), "layout B"))) return s;
  return lt_status(cublasLtMatrixLayoutCreate(&d, CUDA_R_32F, m, n, m), "layout D");
}

int32_t algo_config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attribute) {
  // Every config attribute we read is a 32-bit integer (signed or not).
  uint32_t value = 0;
  size_t written = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &value, sizeof(value), &written);
  return static_cast<int32_t>(value);
}

}  // namespace

Expected<cublasLtMatmulAlgo_t> CublasLtGemm::heuristic_algo(const Plan& p, int64_t n, int64_t m, int64_t k,
                                                            bool no_split, int32_t candidate) {
  cublasLtMatmulPreference_t preference = nullptr;
  Status s = lt_status(cublasLtMatmulPreferenceCreate(&preference), "preference");
  if (!s) return s;
  const size_t workspace = workspace_.bytes();
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &workspace, sizeof(workspace));
  if (no_split) {
    const uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
    cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &none,
                                         sizeof(none));
  }
  constexpr int kCandidates = 8;
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.d, p.d, preference,
                                                               kCandidates, results, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  if (!(s = lt_status(status, "heuristic"))) return s;
  const cublasLtMatmulAlgo_t* chosen = nullptr;
  int32_t seen = 0;
  for (int i = 0; i < found; ++i) {
    if (!no_split) return results[i].algo;
    if (algo_config(results[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM) > 1) continue;
    chosen = &results[i].algo;
    if (seen++ == candidate) break;
  }
  if (chosen != nullptr) return *chosen;
  return Status::error(std::string("cublasLt: no ") + (no_split ? "split-free " : "") +
                       "algorithm for bf16 GEMM n=" + std::to_string(n) + " m=" + std::to_string(m) +
                       " k=" + std::to_string(k));
}

Expected<cublasLtMatmulAlgo_t> CublasLtGemm::pinned_algo(int64_t m, int64_t k) {
  const auto key = std::make_pair(m, k);
  if (auto it = pinned_.find(key); it != pinned_.end()) return it->second;
  Plan representative;
  if (Status s = make_descriptors(representative.desc, representative.a, representative.b, representative.d,
                                  policy_.pinned_rows, m, k);
      !s) {
    return s;
  }
  Expected<cublasLtMatmulAlgo_t> algo =
      heuristic_algo(representative, policy_.pinned_rows, m, k, /*no_split=*/true, policy_.pinned_candidate);
  if (!algo) return algo;
  cublasLtMatmulAlgo_t pinned = *algo;
  // Explicitly, whatever the heuristic's defaults: one pass over k, no reduction.
  const int32_t one_split = 1;
  const uint32_t no_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
  cublasLtMatmulAlgoConfigSetAttribute(&pinned, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one_split, sizeof(one_split));
  cublasLtMatmulAlgoConfigSetAttribute(&pinned, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &no_reduction,
                                       sizeof(no_reduction));
  pinned_.emplace(key, pinned);
  return pinned;
}

Expected<const CublasLtGemm::Plan*> CublasLtGemm::plan(int64_t n, int64_t m, int64_t k) {
  const auto key = std::make_tuple(n, m, k);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  auto p = std::make_unique<Plan>();
  if (Status s = make_descriptors(p->desc, p->a, p->b, p->d, n, m, k); !s) return s;
  Expected<cublasLtMatmulAlgo_t> algo = Status::error("unset");
  if (policy_.batch_invariant) {
    algo = pinned_algo(m, k);
    if (!algo) return algo.status();
    cublasLtMatmulHeuristicResult_t check{};
    const cublasStatus_t status = cublasLtMatmulAlgoCheck(handle_, p->desc, p->a, p->b, p->d, p->d, &*algo, &check);
    if (status != CUBLAS_STATUS_SUCCESS || check.workspaceSize > workspace_.bytes()) {
      ++pinned_fallbacks_;
      algo = heuristic_algo(*p, n, m, k, /*no_split=*/true);
    }
  } else {
    algo = heuristic_algo(*p, n, m, k, /*no_split=*/false);
  }
  if (!algo) return algo.status();
  p->algo = *algo;
  const Plan* raw = p.get();
  plans_.emplace(key, std::move(p));
  return raw;
}

std::string CublasLtGemm::describe_pinned() const {
  std::string out;
  for (const auto& [shape, algo] : pinned_) {
    out += "m=" + std::to_string(shape.first) + " k=" + std::to_string(shape.second) +
           ": id " + std::to_string(algo_config(algo, CUBLASLT_ALGO_CONFIG_ID)) +
           " tile " + std::to_string(algo_config(algo, CUBLASLT_ALGO_CONFIG_TILE_ID)) +
           " stages " + std::to_string(algo_config(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID)) +
           " cluster " + std::to_string(algo_config(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID)) +
           " split " + std::to_string(algo_config(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM)) + "\n";
  }
  return out;
}

Status CublasLtGemm::prepare(int64_t n, int64_t m, int64_t k) {
  Expected<const Plan*> p = plan(n, m, k);
  return p ? Status::ok() : p.status();
}

void CublasLtGemm::matmul(const void* x, const void* w, float* y, int64_t n, int64_t m, int64_t k,
                          float beta, cudaStream_t stream) {
  if (!policy_.batch_invariant && policy_.small_batch_gemv && gemv_supports(x, w, n, k)) {
    bf16_gemv(x, w, y, n, m, k, beta, stream);
    return;
  }
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
