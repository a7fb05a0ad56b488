// Small toolkit of folio_cuda_check: device buffers, NaN poisoning, error statistics with a
// one-line report per check, CUDA-event timing, and the registry the checks add themselves to.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace folio::cuda::check {

#define FOLIO_CUDA_OK(expr)                                                                                 \
  do {                                                                                                      \
    const cudaError_t folio_err = (expr);                                                                   \
    if (folio_err != cudaSuccess) {                                                                         \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(folio_err), __FILE__, __LINE__, \
                   cudaGetErrorString(folio_err));                                                          \
      std::exit(2);                                                                                         \
    }                                                                                                       \
  } while (0)

// Owning device allocation of n elements of T.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (n > 0) FOLIO_CUDA_OK(cudaMalloc(&ptr_, n * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), n_(o.n_) {
    o.ptr_ = nullptr;
    o.n_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      if (ptr_ != nullptr) cudaFree(ptr_);
      ptr_ = o.ptr_;
      n_ = o.n_;
      o.ptr_ = nullptr;
      o.n_ = 0;
    }
    return *this;
  }

  T* get() const { return ptr_; }
  size_t size() const { return n_; }
  void upload(const std::vector<T>& host) {
    if (n_ > 0) FOLIO_CUDA_OK(cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    if (n_ > 0) FOLIO_CUDA_OK(cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  // Every byte 0xff: NaN in fp32, fp16 and bf16, -1 in int32. Unwritten outputs then fail.
  void poison() {
    if (n_ > 0) FOLIO_CUDA_OK(cudaMemset(ptr_, 0xff, n_ * sizeof(T)));
  }

 private:
  T* ptr_ = nullptr;
  size_t n_ = 0;
};

// Error statistics of got vs ref (ref in float64): element i passes when
// |got - ref| <= atol + rtol * |ref|; a NaN in got fails unless ref is NaN too.
struct Comparison {
  size_t count = 0;
  size_t failures = 0;
  double max_abs = 0.0;
  double max_rel = 0.0;  // |got - ref| / max(|ref|, atol)
  size_t worst = 0;      // index with the largest excess over its tolerance
  double worst_got = 0.0, worst_ref = 0.0;
  double worst_excess = -1e300;
};
Comparison compare(const std::vector<double>& got, const std::vector<double>& ref, double atol, double rtol);

// A check's outcome; report() prints it as one line and remembers failures.
struct Outcome {
  std::string name;
  std::string shape;
  Comparison cmp;
  double atol = 0.0, rtol = 0.0;
  double ms = -1.0;  // kernel time of one launch, when measured
  bool pass = false;
  std::string note;
};
void report(const Outcome& outcome);
Outcome outcome_of(const std::string& name, const std::string& shape, const std::vector<double>& got,
                   const std::vector<double>& ref, double atol, double rtol, double ms = -1.0);
// A check that is not an element comparison (exit code, support of a distribution, ...).
void report_flag(const std::string& name, const std::string& shape, bool pass, const std::string& note,
                 double ms = -1.0);
int failures_so_far();

// Times fn (which launches work on the default stream) with CUDA events.
double time_ms(const std::function<void()>& fn, int warmup, int iterations);
// Vectorized device copy (copy_bandwidth.cu): the memory roofline the benchmarks compare to.
// `bytes` a multiple of 16, both pointers 16-byte aligned.
void copy_kernel_16(void* dst, const void* src, size_t bytes, int sm_count, cudaStream_t stream);

// Whether the device runs programmatic dependent launch (sm_90+), and a stream of the checks'
// own for those launches (created once; sync_or_die synchronizes the device).
bool programmatic_launch_supported();
cudaStream_t check_stream();

// product(x, y, stream) run as a programmatic dependent (programmatic_launch.cuh) of a kernel
// that lets it start at once and writes x (a copy of the device rows `x`) and y (y0) only ~20 us
// later, both poisoned until then: y after it (late_writer.cu). A product that read its input or
// output before griddepcontrol.wait gives other values than the plain run.
std::vector<float> run_behind_late_writer(const uint16_t* x, size_t x_elems, const std::vector<float>& y0,
                                          const std::function<void(const uint16_t*, float*, cudaStream_t)>& product);

// Synchronizes and fails the program on any sticky CUDA error.
void sync_or_die(const char* where);

// fp16 / bf16 conversions for host-side data.
uint16_t to_half(float x);
float from_half(uint16_t h);
uint16_t to_bf16(float x);
float from_bf16(uint16_t b);

struct Options {
  bool quick = false;  // a smoke subset
  bool full = false;   // the exhaustive set (every block size and head shape on the large cases)
  bool bench = false;  // benchmarks only, no checks
  std::string filter;
  uint64_t seed = 1234;
  int sm_count = 132;
};

// Registry: each check file registers named checks; main runs those the filter selects.
struct Check {
  std::string name;
  std::function<void(const Options&, std::mt19937_64&)> run;
};
std::vector<Check>& registry();
struct Register {
  Register(const char* name, std::function<void(const Options&, std::mt19937_64&)> run) {
    registry().push_back({name, std::move(run)});
  }
};

}  // namespace folio::cuda::check
