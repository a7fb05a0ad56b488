#include "check_util.h"

#include <algorithm>

#include "core/fp16.h"

namespace folio::cuda::check {
namespace {
int g_failures = 0;
}

Comparison compare(const std::vector<double>& got, const std::vector<double>& ref, double atol, double rtol) {
  Comparison c;
  c.count = std::min(got.size(), ref.size());
  if (got.size() != ref.size()) c.failures += 1;  // size mismatch is a failure of its own
  for (size_t i = 0; i < c.count; ++i) {
    const double g = got[i];
    const double r = ref[i];
    double excess;
    bool ok;
    if (std::isnan(r)) {
      ok = std::isnan(g);
      excess = ok ? -1.0 : 1e300;
    } else if (std::isnan(g) || std::isinf(g) != std::isinf(r)) {
      ok = false;
      excess = 1e300;
    } else if (std::isinf(r)) {
      ok = g == r;
      excess = ok ? -1.0 : 1e300;
    } else {
      const double err = std::fabs(g - r);
      const double tol = atol + rtol * std::fabs(r);
      ok = err <= tol;
      excess = err - tol;
      c.max_abs = std::max(c.max_abs, err);
      c.max_rel = std::max(c.max_rel, err / std::max(std::fabs(r), std::max(atol, 1e-30)));
    }
    if (!ok) ++c.failures;
    if (excess > c.worst_excess) {
      c.worst_excess = excess;
      c.worst = i;
      c.worst_got = g;
      c.worst_ref = r;
    }
  }
  return c;
}

Outcome outcome_of(const std::string& name, const std::string& shape, const std::vector<double>& got,
                   const std::vector<double>& ref, double atol, double rtol, double ms) {
  Outcome o;
  o.name = name;
  o.shape = shape;
  o.cmp = compare(got, ref, atol, rtol);
  o.atol = atol;
  o.rtol = rtol;
  o.ms = ms;
  o.pass = o.cmp.failures == 0;
  return o;
}

void report(const Outcome& o) {
  if (!o.pass) ++g_failures;
  std::printf(
      "%-4s %-28s %-58s n=%-9zu max_abs=%.3e max_rel=%.3e worst[%zu] got=%.6g ref=%.6g "
      "bad=%zu tol=(%.1e,%.1e)",
      o.pass ? "ok" : "FAIL", o.name.c_str(), o.shape.c_str(), o.cmp.count, o.cmp.max_abs, o.cmp.max_rel, o.cmp.worst,
      o.cmp.worst_got, o.cmp.worst_ref, o.cmp.failures, o.atol, o.rtol);
  if (o.ms >= 0) std::printf(" %.3f ms", o.ms);
  if (!o.note.empty()) std::printf(" %s", o.note.c_str());
  std::printf("\n");
  std::fflush(stdout);
}

void report_flag(const std::string& name, const std::string& shape, bool pass, const std::string& note, double ms) {
  if (!pass) ++g_failures;
  std::printf("%-4s %-28s %-58s %s", pass ? "ok" : "FAIL", name.c_str(), shape.c_str(), note.c_str());
  if (ms >= 0) std::printf(" %.3f ms", ms);
  std::printf("\n");
  std::fflush(stdout);
}

int failures_so_far() {
  return g_failures;
}

double time_ms(const std::function<void()>& fn, int warmup, int iterations) {
  for (int i = 0; i < warmup; ++i) fn();
  cudaEvent_t start, stop;
  FOLIO_CUDA_OK(cudaEventCreate(&start));
  FOLIO_CUDA_OK(cudaEventCreate(&stop));
  FOLIO_CUDA_OK(cudaEventRecord(start));
  for (int i = 0; i < iterations; ++i) fn();
  FOLIO_CUDA_OK(cudaEventRecord(stop));
  FOLIO_CUDA_OK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  FOLIO_CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  sync_or_die("timed kernel");
  return ms / std::max(iterations, 1);
}

bool programmatic_launch_supported() {
  static const bool supported = [] {
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    return major >= 9;
  }();
  return supported;
}

cudaStream_t check_stream() {
  static const cudaStream_t stream = [] {
    cudaStream_t s = nullptr;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    return s;
  }();
  return stream;
}

void sync_or_die(const char* where) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    std::printf("FAIL CUDA error after %s: %s (%s); aborting the remaining checks\n", where, cudaGetErrorName(err),
                cudaGetErrorString(err));
    std::fflush(stdout);
    std::exit(3);
  }
}

uint16_t to_half(float x) {
  return fp32_to_fp16(x);
}
float from_half(uint16_t h) {
  return fp16_to_fp32(h);
}
uint16_t to_bf16(float x) {
  return fp32_to_bf16(x);
}
float from_bf16(uint16_t b) {
  return bf16_to_fp32(b);
}

std::vector<Check>& registry() {
  static std::vector<Check> checks;
  return checks;
}

}  // namespace folio::cuda::check
