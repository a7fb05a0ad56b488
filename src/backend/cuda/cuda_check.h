// Error handling at the CUDA API boundary. Setup paths (allocation, upload, graph capture)
// return a Status built by cuda_status(); per-step paths, which cannot fail in a way a caller
// could handle, abort with the call and its location (FOLIO_CUDA_CHECK), as a failed kernel
// launch leaves the context unusable anyway.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/status.h"

namespace folio::cuda {

inline Status cuda_status(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::ok();
  return Status::error(std::string("cuda: ") + what + ": " + cudaGetErrorString(error));
}

[[noreturn]] inline void cuda_fail(const char* call, const char* file, int line, const char* message) {
  std::fprintf(stderr, "folio: CUDA error at %s:%d: %s: %s\n", file, line, call, message);
  std::abort();
}

}  // namespace folio::cuda

#define FOLIO_CUDA_CHECK(call)                                                                    \
  do {                                                                                            \
    const cudaError_t folio_cuda_error_ = (call);                                                 \
    if (folio_cuda_error_ != cudaSuccess) {                                                       \
      ::folio::cuda::cuda_fail(#call, __FILE__, __LINE__, cudaGetErrorString(folio_cuda_error_)); \
    }                                                                                             \
  } while (0)
