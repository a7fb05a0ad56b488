// NCCL is opened with dlopen on first use, like cuBLASLt (cuda_library.h): the binary builds and
// runs without it (one GPU needs no NCCL), and the library is the one FOLIO_NCCL_LIBRARY names,
// the one installed beside CUDA, or one on the loader's path. The few entry points and
// constants folio uses are declared here from NCCL's stable C ABI; where nccl.h is present at
// build time the constants are checked against it.
#include "backend/cuda/nccl_collectives.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_library.h"

#if __has_include(<nccl.h>)
#include <nccl.h>
static_assert(ncclSuccess == 0 && ncclSum == 0 && ncclFloat32 == 7, "NCCL's ABI constants moved");
#endif

namespace folio::cuda {
namespace {

constexpr int kNcclSuccess = 0;
constexpr int kNcclSum = 0;
constexpr int kNcclFloat32 = 7;

using CommInitAllFn = int(void** comms, int ndev, const int* devices);
using CommDestroyFn = int(void* comm);
using AllReduceFn = int(const void* send, void* recv, size_t count, int type, int op, void* comm, cudaStream_t stream);
using AllGatherFn = int(const void* send, void* recv, size_t count, int type, void* comm, cudaStream_t stream);
using ErrorStringFn = const char*(int result);
using VersionFn = int(int* version);

struct Nccl {
  CommInitAllFn* comm_init_all = nullptr;
  CommDestroyFn* comm_destroy = nullptr;
  AllReduceFn* all_reduce = nullptr;
  AllGatherFn* all_gather = nullptr;
  ErrorStringFn* error_string = nullptr;
  VersionFn* version = nullptr;
  std::string error;  // why it is not there
};

void* open_library(std::string& error) {
  if (const char* path = std::getenv("FOLIO_NCCL_LIBRARY"); path != nullptr && *path != '\0') {
    if (void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL)) return handle;
    error = std::string("cannot open FOLIO_NCCL_LIBRARY=") + path + ": " + dlerror();
    return nullptr;
  }
  void* handle = open_cuda_library("libnccl.so.2", error);
  if (handle == nullptr) error += "; set FOLIO_NCCL_LIBRARY to its path";
  return handle;
}

const Nccl& nccl() {
  static Nccl lib;
  static std::once_flag once;
  std::call_once(once, [] {
    void* handle = open_library(lib.error);
    if (handle == nullptr) return;
    auto find = [&](auto*& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
      if (fn == nullptr && lib.error.empty()) lib.error = std::string("NCCL has no ") + name;
    };
    find(lib.comm_init_all, "ncclCommInitAll");
    find(lib.comm_destroy, "ncclCommDestroy");
    find(lib.all_reduce, "ncclAllReduce");
    find(lib.all_gather, "ncclAllGather");
    find(lib.error_string, "ncclGetErrorString");
    find(lib.version, "ncclGetVersion");
    if (!lib.error.empty()) lib.comm_init_all = nullptr;
  });
  return lib;
}

void check(int result, const char* call) {
  if (result == kNcclSuccess) return;
  cuda_fail(call, __FILE__, __LINE__, nccl().error_string(result));
}

}  // namespace

std::string NcclCollectives::version() {
  const Nccl& lib = nccl();
  int v = 0;
  if (lib.comm_init_all == nullptr || lib.version(&v) != kNcclSuccess) return {};
  // NCCL_VERSION(X, Y, Z) = X * 10000 + Y * 100 + Z since 2.9.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

Expected<std::unique_ptr<NcclCollectives>> NcclCollectives::create(const std::vector<int32_t>& devices) {
  const Nccl& lib = nccl();
  if (lib.comm_init_all == nullptr) return Status::error("tensor parallel over GPUs needs NCCL: " + lib.error);
  // NVLink multicast off unless asked for (see the header).
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  std::unique_ptr<NcclCollectives> c(new NcclCollectives());
  c->comms_.assign(devices.size(), nullptr);
  const int result = lib.comm_init_all(c->comms_.data(), static_cast<int>(devices.size()), devices.data());
  if (result != kNcclSuccess) {
    c->comms_.clear();
    return Status::error(std::string("NCCL: creating the communicators: ") + lib.error_string(result));
  }
  return c;
}

NcclCollectives::~NcclCollectives() {
  for (void* comm : comms_) {
    if (comm != nullptr) nccl().comm_destroy(comm);
  }
}

void NcclCollectives::all_reduce_sum(int32_t rank, float* data, size_t n, CUstream_st* stream) {
  check(nccl().all_reduce(data, data, n, kNcclFloat32, kNcclSum, comms_[static_cast<size_t>(rank)], stream),
        "ncclAllReduce");
}

void NcclCollectives::all_gather(int32_t rank, const float* send, float* gathered, size_t n, CUstream_st* stream) {
  check(nccl().all_gather(send, gathered, n, kNcclFloat32, comms_[static_cast<size_t>(rank)], stream), "ncclAllGather");
}

}  // namespace folio::cuda
