// Opening a CUDA-side library at run time (cuBLASLt, NCCL) rather than linking it: a CPU-only
// run never maps it, and a build runs where it is missing until it is needed. The library is
// looked for beside libcudart (which is linked, so its directory is the toolkit's), then by
// name on the loader's path.
#pragma once

#include <string>

namespace folio::cuda {

// dlopen(RTLD_NOW | RTLD_LOCAL) of `name` (e.g. "libnccl.so.2"); null with `error` set.
void* open_cuda_library(const std::string& name, std::string& error);

}  // namespace folio::cuda
