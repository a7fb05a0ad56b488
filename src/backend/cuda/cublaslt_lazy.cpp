// The cuBLASLt entry points folio calls, defined here and forwarded to the library opened with
// dlopen on the first call, so the binary does not link libcublasLt: a CPU-only run never maps
// it (its relocations alone touched ~57 MB of the resident set of every `folio run`). The
// library is looked for beside libcudart (which is linked), then by name. If it cannot be
// opened every call returns CUBLAS_STATUS_NOT_INITIALIZED and the reason is printed once.
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <mutex>
#include <string>

#include "backend/cuda/cuda_library.h"

namespace {

void* open_library() {
  std::string error;
  void* handle = folio::cuda::open_cuda_library("libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR), error);
  if (handle == nullptr) std::fprintf(stderr, "folio: %s\n", error.c_str());
  return handle;
}

void* library() {
  static void* handle = nullptr;
  static std::once_flag once;
  std::call_once(once, [] { handle = open_library(); });
  return handle;
}

template <typename Fn>
Fn* entry(const char* name) {
  void* handle = library();
  return handle == nullptr ? nullptr : reinterpret_cast<Fn*>(dlsym(handle, name));
}

}  // namespace

// Each forwarder looks its function up once (a static local) and keeps cuBLASLt's signature, so
// a mismatch with the header is a compile error.
#define FOLIO_CUBLASLT_FORWARD(name, params, args)                            \
  extern "C" cublasStatus_t CUBLASWINAPI name params {                        \
    static auto* const fn = entry<cublasStatus_t CUBLASWINAPI params>(#name); \
    return fn == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED : fn args;           \
  }

FOLIO_CUBLASLT_FORWARD(cublasLtCreate, (cublasLtHandle_t * handle), (handle))
FOLIO_CUBLASLT_FORWARD(cublasLtDestroy, (cublasLtHandle_t handle), (handle))
FOLIO_CUBLASLT_FORWARD(cublasLtMatmul,
                       (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
                        cublasLtMatrixLayout_t a_desc, const void* b, cublasLtMatrixLayout_t b_desc, const void* beta,
                        const void* c, cublasLtMatrixLayout_t c_desc, void* d, cublasLtMatrixLayout_t d_desc,
                        const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes, cudaStream_t stream),
                       (handle, desc, alpha, a, a_desc, b, b_desc, beta, c, c_desc, d, d_desc, algo, workspace,
                        workspace_bytes, stream))
FOLIO_CUBLASLT_FORWARD(cublasLtMatmulAlgoCheck,
                       (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a_desc,
                        cublasLtMatrixLayout_t b_desc, cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,
                        const cublasLtMatmulAlgo_t* algo, cublasLtMatmulHeuristicResult_t* result),
                       (handle, desc, a_desc, b_desc, c_desc, d_desc, algo, result))
FOLIO_CUBLASLT_FORWARD(cublasLtMatmulAlgoConfigGetAttribute,
                       (const cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t attr, void* buf,
                        size_t size, size_t* written),
                       (algo, attr, buf, size, written))
FOLIO_CUBLASLT_FORWARD(cublasLtMatmulAlgoConfigSetAttribute,
                       (cublasLtMatmulAlgo_t * algo, cublasLtMatmulAlgoConfigAttributes_t attr, const void* buf,
                        size_t size),
                       (algo, attr, buf, size))
FOLIO_CUBLASLT_FORWARD(cublasLtMatmulAlgoGetHeuristic,
                       (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a_desc,
                        cublasLtMatrixLayout_t b_desc, cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,
                        cublasLtMatmulPreference_t preference, int requested, cublasLtMatmulHeuristicResult_t results[],
                        int* returned),
                       (handle, desc, a_desc, b_desc, c_desc, d_desc, preference, requested, results, returned))
FOLIO_CUBLASLT_FORWARD(cublasLtMatmulDescCreate,
                       (cublasLtMatmulDesc_t * desc, cublasComputeType_t compute, cudaDataType_t scale),
                       (desc, compute, scale))
FOLIO_CUBLASLT_FORWARD(cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t desc), (desc))
FOLIO_CUBLASLT_FORWARD(cublasLtMatmulDescSetAttribute,
                       (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf, size_t size),
                       (desc, attr, buf, size))
FOLIO_CUBLASLT_FORWARD(cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t * pref), (pref))
FOLIO_CUBLASLT_FORWARD(cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref), (pref))
FOLIO_CUBLASLT_FORWARD(cublasLtMatmulPreferenceSetAttribute,
                       (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                        size_t size),
                       (pref, attr, buf, size))
FOLIO_CUBLASLT_FORWARD(cublasLtMatrixLayoutCreate,
                       (cublasLtMatrixLayout_t * layout, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld),
                       (layout, type, rows, cols, ld))
FOLIO_CUBLASLT_FORWARD(cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t layout), (layout))

#undef FOLIO_CUBLASLT_FORWARD
