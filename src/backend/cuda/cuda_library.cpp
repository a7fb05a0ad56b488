#include "backend/cuda/cuda_library.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

namespace folio::cuda {

void* open_cuda_library(const std::string& name, std::string& error) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cudaGetDeviceCount), &info) != 0 && info.dli_fname != nullptr) {
    std::string dir = info.dli_fname;
    dir = dir.substr(0, dir.find_last_of('/') + 1);
    if (void* handle = dlopen((dir + name).c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  }
  if (void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  const char* why = dlerror();
  error = "cannot open " + name + (why != nullptr ? std::string(": ") + why : std::string());
  return nullptr;
}

}  // namespace folio::cuda
