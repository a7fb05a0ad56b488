#include "backend/cuda/cublaslt_gemm.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/fp8_rows.h"
#include "backend/cuda/fp8_small_gemm.h"
#include "backend/cuda/gather_rows.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/grouped_wgmma_gemm.h"
#include "backend/cuda/int4_gemm.h"
#include "backend/cuda/int8_gemm.h"

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
  WeightFormat format = WeightFormat::kBf16;
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
  gemm->set_policy(policy);
  if (Status s = lt_status(cublasLtCreate(&gemm->handle_), "create"); !s) return s;
  if (Status s = gemm->workspace_.allocate(workspace_bytes, "gemm workspace"); !s) return s;
  return Expected<std::unique_ptr<CublasLtGemm>>(std::move(gemm));
}

CublasLtGemm::~CublasLtGemm() {
  plans_.clear();
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

static_assert(sizeof(cublasLtMatmulAlgo_t) == sizeof(PinnedGemmAlgo::algo), "cublasLtMatmulAlgo_t is 64 bytes");

void CublasLtGemm::set_policy(const GemmPolicy& policy) {
  plans_.clear();
  pinned_.clear();
  pinned_fallbacks_ = 0;
  policy_ = policy;
  for (const PinnedGemmAlgo& given : policy.pinned) {
    cublasLtMatmulAlgo_t algo{};
    std::memcpy(&algo, given.algo.data(), sizeof(algo));
    pinned_[Shape(given.format, given.m, given.k)] = algo;
  }
}

std::vector<PinnedGemmAlgo> CublasLtGemm::pinned_algorithms() const {
  std::vector<PinnedGemmAlgo> out;
  for (const auto& [shape, algo] : pinned_) {
    PinnedGemmAlgo p;
    p.format = std::get<0>(shape);
    p.m = std::get<1>(shape);
    p.k = std::get<2>(shape);
    std::memcpy(p.algo.data(), &algo, sizeof(algo));
    out.push_back(p);
  }
  return out;
}

namespace {

// FP8: A and B in E4M3 with a float per row of op(A) (the weight's output channels) and per
// column of B (the tokens); the accumulation is promoted to full FP32 periodically (fast
// accumulation off), which costs little at these shapes and keeps the error at FP32's. The
// heuristic refuses outer-vector scaling (CUBLAS_STATUS_INVALID_VALUE) while the scale pointers
// are unset (cuBLAS 13.1 on the H200, the fp8_probe check), so both start at scale_placeholder,
// any device address, and each call sets its own.
Status make_descriptors(WeightFormat format, cublasLtMatmulDesc_t& desc, cublasLtMatrixLayout_t& a,
                        cublasLtMatrixLayout_t& b, cublasLtMatrixLayout_t& d, int64_t n, int64_t m, int64_t k,
                        const void* scale_placeholder) {
  Status s = lt_status(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
  if (!s) return s;
  const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose));
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof(keep));
  const bool fp8 = format == WeightFormat::kFp8E4M3;
  if (fp8) {
    const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    const int8_t fast_accumulation = 0;
    if (!(s = lt_status(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)),
                        "A scale mode")) ||
        !(s = lt_status(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)),
                        "B scale mode"))) {
      return s;
    }
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accumulation,
                                   sizeof(fast_accumulation));
    if (scale_placeholder == nullptr) return Status::error("cublasLt: FP8 GEMM before reserve_fp8_activations");
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_placeholder,
                                   sizeof(scale_placeholder));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_placeholder,
                                   sizeof(scale_placeholder));
  }
  const cudaDataType_t input = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  if (!(s = lt_status(cublasLtMatrixLayoutCreate(&a, input, k, m, k), "layout A"))) return s;
  if (!(s = lt_status(cublasLtMatrixLayoutCreate(&b, input, k, n, k), "layout B"))) return s;
  return lt_status(cublasLtMatrixLayoutCreate(&d, CUDA_R_32F, m, n, m), "layout D");
}

int32_t algo_config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attribute) {
  // Every config attribute we read is a 32-bit integer (signed or not).
  uint32_t value = 0;
  size_t written = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &value, sizeof(value), &written);
  return static_cast<int32_t>(value);
}

// Explicitly, whatever the heuristic's defaults: one pass over k, no reduction.
cublasLtMatmulAlgo_t without_split(cublasLtMatmulAlgo_t algo) {
  const int32_t one_split = 1;
  const uint32_t no_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
  cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one_split, sizeof(one_split));
  cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &no_reduction,
                                       sizeof(no_reduction));
  return algo;
}

std::string describe(const cublasLtMatmulAlgo_t& algo) {
  return "id " + std::to_string(algo_config(algo, CUBLASLT_ALGO_CONFIG_ID)) + " tile " +
         std::to_string(algo_config(algo, CUBLASLT_ALGO_CONFIG_TILE_ID)) + " stages " +
         std::to_string(algo_config(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID)) + " cluster " +
         std::to_string(algo_config(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
}

}  // namespace

Expected<std::vector<cublasLtMatmulAlgo_t>> CublasLtGemm::heuristic_results(const Plan& p, bool no_split) {
  cublasLtMatmulPreference_t preference = nullptr;
  Status s = lt_status(cublasLtMatmulPreferenceCreate(&preference), "preference");
  if (!s) return s;
  const size_t workspace = workspace_.bytes();
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                       sizeof(workspace));
  if (no_split) {
    const uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
    cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &none, sizeof(none));
  }
  constexpr int kCandidates = 8;
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.d, p.d, preference, kCandidates, results, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  if (!(s = lt_status(status, "heuristic"))) return s;
  std::vector<cublasLtMatmulAlgo_t> out;
  for (int i = 0; i < found; ++i) {
    if (no_split && algo_config(results[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM) > 1) continue;
    out.push_back(results[i].algo);
  }
  return out;
}

Expected<cublasLtMatmulAlgo_t> CublasLtGemm::heuristic_algo(const Plan& p, int64_t n, int64_t m, int64_t k,
                                                            bool no_split, int32_t candidate) {
  Expected<std::vector<cublasLtMatmulAlgo_t>> results = heuristic_results(p, no_split);
  if (!results) return results.status();
  if (!results->empty()) {
    const size_t index =
        no_split ? std::min<size_t>(static_cast<size_t>(std::max(candidate, 0)), results->size() - 1) : 0;
    return (*results)[index];
  }
  return Status::error(std::string("cublasLt: no ") + (no_split ? "split-free " : "") + "algorithm for " +
                       weight_format_name(p.format) + " GEMM n=" + std::to_string(n) + " m=" + std::to_string(m) +
                       " k=" + std::to_string(k));
}

Expected<cublasLtMatmulAlgo_t> CublasLtGemm::pinned_algo(WeightFormat format, int64_t m, int64_t k) {
  const Shape key(format, m, k);
  if (auto it = pinned_.find(key); it != pinned_.end()) return it->second;
  Plan representative;
  representative.format = format;
  if (Status s = make_descriptors(format, representative.desc, representative.a, representative.b, representative.d,
                                  policy_.pinned_rows, m, k, fp8_scales_.get());
      !s) {
    return s;
  }
  Expected<cublasLtMatmulAlgo_t> algo =
      heuristic_algo(representative, policy_.pinned_rows, m, k, /*no_split=*/true, policy_.pinned_candidate);
  if (!algo) return algo;
  const cublasLtMatmulAlgo_t pinned = without_split(*algo);
  pinned_.emplace(key, pinned);
  return pinned;
}

Expected<const CublasLtGemm::Plan*> CublasLtGemm::plan(WeightFormat format, int64_t n, int64_t m, int64_t k) {
  const auto key = std::make_tuple(format, n, m, k);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  auto p = std::make_unique<Plan>();
  p->format = format;
  if (Status s = make_descriptors(format, p->desc, p->a, p->b, p->d, n, m, k, fp8_scales_.get()); !s) return s;
  Expected<cublasLtMatmulAlgo_t> algo = Status::error("unset");
  if (policy_.batch_invariant) {
    algo = pinned_algo(format, m, k);
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

Expected<PinnedTuning> CublasLtGemm::tune_pinned(const void* x, const DeviceMatrix& w, float* y, int64_t max_n,
                                                 int64_t m, int64_t k, float beta, cudaStream_t stream) {
  if (w.grouped()) {
    // INT4 / INT8 products under this policy are the BF16 GEMM on the dequantized weights.
    if (m * k > dequantize_scratch_elems_) {
      return Status::error("cublasLt: INT4 / INT8 tuning past the reserved scratch");
    }
    dequantize_grouped(w, m, k, stream);
    return tune_pinned(x, DeviceMatrix{WeightFormat::kBf16, dequantize_scratch_.get(), nullptr}, y, max_n, m, k, beta,
                       stream);
  }
  const auto start = std::chrono::steady_clock::now();
  PinnedTuning tuning;
  tuning.format = w.format;
  tuning.m = m;
  tuning.k = k;
  if (pinned_.count(Shape(w.format, m, k)) > 0) {
    tuning.reused = true;
    return tuning;
  }
  if (w.format == WeightFormat::kFp8E4M3) {
    if (max_n > fp8_rows_ || k > fp8_k_) return Status::error("cublasLt: FP8 tuning past the reserved activations");
    x = fp8_x_.get();
  }
  std::vector<int64_t> rows;
  for (int64_t n : {int64_t{1}, int64_t{256}, int64_t{8192}}) {
    n = std::max<int64_t>(1, std::min(n, max_n));
    if (rows.empty() || rows.back() != n) rows.push_back(n);
  }
  const size_t num_rows = rows.size();
  std::vector<std::unique_ptr<Plan>> plans;
  for (int64_t n : rows) {
    plans.push_back(std::make_unique<Plan>());
    Plan& p = *plans.back();
    p.format = w.format;
    if (Status s = make_descriptors(w.format, p.desc, p.a, p.b, p.d, n, m, k, fp8_scales_.get()); !s) return s;
  }
  // Candidates from the largest n first: the heuristic's prefill pick leads, so that near-ties
  // (see the 3% below) resolve the same way from run to run.
  std::vector<cublasLtMatmulAlgo_t> candidates;
  for (size_t i = num_rows; i-- > 0;) {
    Expected<std::vector<cublasLtMatmulAlgo_t>> found = heuristic_results(*plans[i], /*no_split=*/true);
    if (!found) return found.status();
    for (const cublasLtMatmulAlgo_t& raw : *found) {
      const cublasLtMatmulAlgo_t algo = without_split(raw);
      const bool seen = std::any_of(candidates.begin(), candidates.end(), [&](const cublasLtMatmulAlgo_t& c) {
        return std::memcmp(&c, &algo, sizeof(algo)) == 0;
      });
      if (!seen) candidates.push_back(algo);
    }
  }
  if (candidates.empty()) {
    return Status::error(std::string("cublasLt: no split-free algorithm for ") + weight_format_name(w.format) +
                         " GEMM m=" + std::to_string(m) + " k=" + std::to_string(k));
  }
  cudaEvent_t begin = nullptr, end = nullptr;
  if (Status s = cuda_status(cudaEventCreate(&begin), "tuning events"); !s) return s;
  if (Status s = cuda_status(cudaEventCreate(&end), "tuning events"); !s) {
    cudaEventDestroy(begin);
    return s;
  }
  auto run = [&](const Plan& p, const cublasLtMatmulAlgo_t& algo) {
    return launch(p, algo, x, w, y, beta, stream) == CUBLAS_STATUS_SUCCESS;
  };
  // Mean microseconds of reps back-to-back calls; infinity when a call fails.
  constexpr double kNever = std::numeric_limits<double>::infinity();
  auto time_us = [&](const Plan& p, const cublasLtMatmulAlgo_t& algo, int reps) {
    bool ok = cudaEventRecord(begin, stream) == cudaSuccess;
    for (int r = 0; r < reps && ok; ++r) ok = run(p, algo);
    ok = ok && cudaEventRecord(end, stream) == cudaSuccess && cudaEventSynchronize(end) == cudaSuccess;
    float ms = 0.0f;
    ok = ok && cudaEventElapsedTime(&ms, begin, end) == cudaSuccess;
    return ok ? 1e3 * ms / reps : kNever;
  };
  {  // About 10 ms of work first: an idle GPU raises its clocks over the first milliseconds,
     // which would make the first candidates look slow.
    const double once = time_us(*plans.back(), candidates.front(), 1);
    if (once < kNever) time_us(*plans.back(), candidates.front(), static_cast<int>(std::clamp(1e4 / once, 1.0, 200.0)));
  }
  std::vector<std::array<double, 3>> us(candidates.size());
  std::array<double, 3> best{kNever, kNever, kNever};
  for (size_t c = 0; c < candidates.size(); ++c) {
    us[c].fill(kNever);
    bool usable = true;
    for (size_t i = 0; i < num_rows && usable; ++i) {
      cublasLtMatmulHeuristicResult_t check{};
      usable = cublasLtMatmulAlgoCheck(handle_, plans[i]->desc, plans[i]->a, plans[i]->b, plans[i]->d, plans[i]->d,
                                       &candidates[c], &check) == CUBLAS_STATUS_SUCCESS &&
               check.workspaceSize <= workspace_.bytes();
    }
    for (size_t i = 0; i < num_rows && usable; ++i) {
      const Plan& p = *plans[i];
      if (!run(p, candidates[c])) break;  // warm-up: loads the kernel
      const double probe = time_us(p, candidates[c], 1);
      // Far behind the best so far: that one call is estimate enough (some candidates take
      // 100x the best, and n = 8192 calls last milliseconds).
      us[c][i] = probe > 4.0 * best[i] ? probe : time_us(p, candidates[c], rows[i] >= 4096 ? 3 : 10);
      best[i] = std::min(best[i], us[c][i]);
    }
  }
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  // A candidate that failed to launch scored infinity; its error must not outlive the tuning.
  (void)cudaGetLastError();
  std::vector<double> score(candidates.size(), kNever);
  double least = kNever;
  for (size_t c = 0; c < candidates.size(); ++c) {
    double sum = 0.0;
    // Prefill-sized n counts double: offline runs spend about half their GPU time there, and
    // equal weights would trade +17% there for -35% at n = 1 (the last run's sweep).
    for (size_t i = 0; i < num_rows; ++i) sum += (rows[i] >= 4096 ? 2.0 : 1.0) * us[c][i] / best[i];
    score[c] = sum;
    least = std::min(least, sum);
  }
  if (!(least < kNever)) {
    return Status::error(std::string("cublasLt: no split-free algorithm ran for ") + weight_format_name(w.format) +
                         " GEMM m=" + std::to_string(m) + " k=" + std::to_string(k));
  }
  size_t chosen = 0;
  while (!(score[chosen] <= 1.03 * least)) ++chosen;
  pinned_.emplace(Shape(w.format, m, k), candidates[chosen]);
  tuning.algorithm = describe(candidates[chosen]);
  tuning.candidates = static_cast<int32_t>(candidates.size());
  tuning.num_rows = static_cast<int32_t>(num_rows);
  for (size_t i = 0; i < num_rows; ++i) {
    tuning.rows[i] = rows[i];
    tuning.chosen_us[i] = us[chosen][i];
    tuning.best_us[i] = best[i];
  }
  tuning.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return tuning;
}

std::string CublasLtGemm::describe_pinned() const {
  std::string out;
  for (const auto& [shape, algo] : pinned_) {
    out += std::string(weight_format_name(std::get<0>(shape))) + " m=" + std::to_string(std::get<1>(shape)) +
           " k=" + std::to_string(std::get<2>(shape)) + ": " + describe(algo) + " split " +
           std::to_string(algo_config(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM)) + "\n";
  }
  return out;
}

Status CublasLtGemm::prepare(int64_t n, int64_t m, int64_t k, WeightFormat format) {
  // Past the small GEMMs INT4 and INT8 are dequantized: the BF16 GEMM.
  if (format == WeightFormat::kInt4 || format == WeightFormat::kInt8) format = WeightFormat::kBf16;
  Expected<const Plan*> p = plan(format, n, m, k);
  return p ? Status::ok() : p.status();
}

Status CublasLtGemm::reserve_fp8_activations(int64_t max_rows, int64_t max_k) {
  if (max_rows <= fp8_rows_ && max_k <= fp8_k_) return Status::ok();
  fp8_rows_ = std::max(fp8_rows_, max_rows);
  fp8_k_ = std::max(fp8_k_, max_k);
  if (Status s = fp8_x_.allocate(static_cast<size_t>(fp8_rows_ * fp8_k_), "FP8 activations"); !s) return s;
  return fp8_scales_.allocate(static_cast<size_t>(fp8_rows_) * sizeof(float), "FP8 activation scales");
}

void CublasLtGemm::dequantize_grouped(const DeviceMatrix& w, int64_t m, int64_t k, cudaStream_t stream) {
  const auto* codes = static_cast<const uint8_t*>(w.data);
  if (w.format == WeightFormat::kInt4) {
    dequantize_int4(codes, w.groups, w.group_shift, m, k, dequantize_scratch_.get<uint16_t>(), stream);
  } else {
    dequantize_int8(codes, w.groups, w.group_shift, m, k, dequantize_scratch_.get<uint16_t>(), stream);
  }
}

Status CublasLtGemm::reserve_input_gather(int64_t max_rows, int64_t max_k) {
  if (max_rows <= gather_rows_ && max_k <= gather_k_) return Status::ok();
  gather_rows_ = std::max(gather_rows_, max_rows);
  gather_k_ = std::max(gather_k_, max_k);
  return gathered_x_.allocate(static_cast<size_t>(gather_rows_ * gather_k_) * 2, "act-order input gather");
}

Status CublasLtGemm::reserve_dequantize_scratch(int64_t max_elems) {
  if (max_elems <= dequantize_scratch_elems_) return Status::ok();
  dequantize_scratch_elems_ = max_elems;
  if (Status s = dequantize_scratch_.allocate(static_cast<size_t>(max_elems) * 2, "INT4 / INT8 dequantization scratch");
      !s) {
    return s;
  }
  if (split_counters_.get() != nullptr) return Status::ok();
  const size_t counter_bytes = sizeof(int) * kGroupedWgmmaCounters;
  if (Status s = split_counters_.allocate(counter_bytes, "INT4 / INT8 split-K counters"); !s) return s;
  if (cudaMemset(split_counters_.get(), 0, counter_bytes) != cudaSuccess) {
    return Status::error("cudaMemset of the split-K counters failed");
  }
  return Status::ok();
}

cublasStatus_t CublasLtGemm::launch(const Plan& p, const cublasLtMatmulAlgo_t& algo, const void* x,
                                    const DeviceMatrix& w, float* y, float beta, cudaStream_t stream) {
  if (p.format == WeightFormat::kFp8E4M3) {
    // The scale vectors are per call (each layer's weight has its own); setting them is host
    // state read at launch, so a captured graph keeps the pointers of its capture.
    const void* w_scales = w.scales;
    const void* x_scales = fp8_scales_.get();
    cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scales, sizeof(w_scales));
    cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scales, sizeof(x_scales));
  }
  const float alpha = 1.0f;
  return cublasLtMatmul(handle_, p.desc, &alpha, w.data, p.a, x, p.b, &beta, y, p.d, y, p.d, &algo, workspace_.get(),
                        workspace_.bytes(), stream);
}

void CublasLtGemm::matmul(const void* x, const void* w, float* y, int64_t n, int64_t m, int64_t k, float beta,
                          cudaStream_t stream) {
  matmul(x, DeviceMatrix{WeightFormat::kBf16, w, nullptr}, y, n, m, k, beta, stream);
}

void CublasLtGemm::matmul(const void* x, const DeviceMatrix& w, float* y, int64_t n, int64_t m, int64_t k, float beta,
                          cudaStream_t stream) {
  if (w.grouped()) {
    const auto* codes = static_cast<const uint8_t*>(w.data);
    auto small_gemm_takes = [&](const void* input) {
      if (policy_.batch_invariant) return false;
      if (w.format == WeightFormat::kInt4) {
        return n <= policy_.int4_small_gemm_max_rows && int4_small_gemm_supports(input, n, m, k);
      }
      return w.format == WeightFormat::kInt8 && n <= policy_.int8_small_gemm_max_rows &&
             int8_small_gemm_supports(input, n, m, k);
    };
    // Act-order: the small GEMM reads a decode step's inputs through the order itself; other
    // products gather them first.
    const int32_t* order = w.input_order;
    if (order != nullptr &&
        !(policy_.small_gemm_reads_input_order && n <= kSmallGemmOrderedMaxRows && small_gemm_takes(x))) {
      if (n > gather_rows_ || k > gather_k_) {
        cuda_fail("CublasLtGemm::matmul", __FILE__, __LINE__, "act-order input gather not reserved");
      }
      gather_columns_bf16(static_cast<const uint16_t*>(x), order, n, k, gathered_x_.get<uint16_t>(), stream);
      x = gathered_x_.get();
      order = nullptr;
    }
    if (small_gemm_takes(x)) {
      if (w.format == WeightFormat::kInt4) {
        int4_small_gemm(x, codes, w.groups, w.group_shift, y, n, m, k, beta, stream, order, policy_.int4_wide_for(n),
                        policy_.programmatic_launch, policy_.small_gemm_streamed);
      } else {
        int8_small_gemm(x, codes, w.groups, w.group_shift, y, n, m, k, beta, stream, order, policy_.programmatic_launch,
                        policy_.small_gemm_streamed);
      }
      return;
    }
    if (!policy_.batch_invariant) {
      if (n <= policy_.grouped_wgmma_max_rows && m * k <= dequantize_scratch_elems_ &&
          grouped_wgmma_gemm_supports(x, n, m, k) &&
          (policy_.grouped_wgmma_split_k || grouped_wgmma_gemm_fills_device(n, m))) {
        grouped_wgmma_gemm(w.format == WeightFormat::kInt4 ? 4 : 8, x, codes, w.groups, w.group_shift, y, n, m, k, beta,
                           dequantize_scratch_.get(), dequantize_scratch_.bytes(), split_counters_.get<int>(), stream);
        return;
      }
    }
    // Larger n (and the invariant policy: a deterministic dequantization, then one pinned
    // algorithm): the BF16 weights into scratch, then the BF16 GEMM.
    if (m * k > dequantize_scratch_elems_) {
      cuda_fail("CublasLtGemm::matmul", __FILE__, __LINE__, "INT4 / INT8 dequantization scratch not reserved");
    }
    dequantize_grouped(w, m, k, stream);
    matmul(x, DeviceMatrix{WeightFormat::kBf16, dequantize_scratch_.get(), nullptr}, y, n, m, k, beta, stream);
    return;
  }
  const bool fp8 = w.format == WeightFormat::kFp8E4M3;
  const int64_t gemv_rows = fp8 ? policy_.gemv_max_rows_fp8 : policy_.gemv_max_rows_bf16;
  if (!policy_.batch_invariant && policy_.small_batch_gemv && n <= gemv_rows && gemv_supports(x, w.data, n, k)) {
    if (fp8) {
      fp8_gemv(x, w.data, w.scales, y, n, m, k, beta, stream, policy_.programmatic_launch);
    } else {
      bf16_gemv(x, w.data, y, n, m, k, beta, stream, policy_.programmatic_launch);
    }
    return;
  }
  if (fp8) {
    if (n > fp8_rows_ || k > fp8_k_) {
      cuda_fail("CublasLtGemm::matmul", __FILE__, __LINE__, "FP8 activations not reserved");
    }
    quantize_rows_e4m3(static_cast<const uint16_t*>(x), n, k, k, fp8_x_.get<uint8_t>(), fp8_scales_.get<float>(),
                       stream);
    x = fp8_x_.get();
    if (!policy_.batch_invariant && n <= policy_.fp8_small_gemm_max_rows &&
        fp8_small_gemm_supports(x, w.data, n, m, k)) {
      fp8_small_gemm(fp8_x_.get<uint8_t>(), fp8_scales_.get<float>(), static_cast<const uint8_t*>(w.data), w.scales, y,
                     n, m, k, beta, stream);
      return;
    }
  }
  Expected<const Plan*> p = plan(w.format, n, m, k);
  if (!p) cuda_fail("CublasLtGemm::plan", __FILE__, __LINE__, p.error().c_str());
  const cublasStatus_t status = launch(**p, (*p)->algo, x, w, y, beta, stream);
  if (status != CUBLAS_STATUS_SUCCESS) {
    cuda_fail("cublasLtMatmul", __FILE__, __LINE__, std::to_string(static_cast<int>(status)).c_str());
  }
}

const char* weight_format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::kFp8E4M3: return "fp8";
    case WeightFormat::kInt4: return "int4";
    case WeightFormat::kInt8: return "int8";
    default: return "bf16";
  }
}

}  // namespace folio::cuda
