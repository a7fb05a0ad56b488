// folio_cuda_check: runs every CUDA kernel on random inputs against the CPU backend / float64
// references and prints one line per check (shape, max abs/rel error, worst index, time).
//   folio_cuda_check [--quick | --full] [--filter NAME] [--seed N] [--list]
//   folio_cuda_check --bench      benchmarks only (no checks), RESULT lines for scripts/gpu-check
// The default set is sized to finish in well under 30 s on an H200; --full is the exhaustive
// one. Exit code: 0 when every check passed, 1 when any failed, 2-3 on CUDA errors.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "check_util.h"

namespace folio::cuda::check {
void run_benchmarks(const Options& opt, std::mt19937_64& rng);
}

int main(int argc, char** argv) {
  using namespace folio::cuda::check;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  Options opt;
  bool list = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick")
      opt.quick = true;
    else if (arg == "--full")
      opt.full = true;
    else if (arg == "--bench")
      opt.bench = true;
    else if (arg == "--list")
      list = true;
    else if (arg == "--filter" && i + 1 < argc)
      opt.filter = argv[++i];
    else if (arg == "--seed" && i + 1 < argc)
      opt.seed = std::stoull(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--quick | --full] [--filter NAME] [--bench] [--seed N] [--list]\n", argv[0]);
      return 2;
    }
  }
  if (list) {
    for (const Check& c : registry()) std::printf("%s\n", c.name.c_str());
    return 0;
  }
  int device = 0;
  cudaDeviceProp prop{};
  FOLIO_CUDA_OK(cudaGetDevice(&device));
  FOLIO_CUDA_OK(cudaGetDeviceProperties(&prop, device));
  opt.sm_count = prop.multiProcessorCount;
  std::printf("device %d: %s, sm_%d%d, %d SMs, %.1f GiB, L2 %d MiB, smem/block optin %zu KiB; seed %llu%s\n", device,
              prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / double(1 << 30),
              prop.l2CacheSize >> 20, prop.sharedMemPerBlockOptin >> 10, static_cast<unsigned long long>(opt.seed),
              opt.bench   ? " (bench)"
              : opt.quick ? " (quick)"
              : opt.full  ? " (full)"
                          : "");
  if (opt.bench) {
    std::mt19937_64 rng(opt.seed);
    run_benchmarks(opt, rng);
    std::printf("\nbenchmarks done in %.1f s\n", seconds_since(start));
    return 0;
  }
  int ran = 0;
  // Groups whose name ends in "_v2" or "_v3" (new kernel variants) run after all the others, so that
  // a fault in a new kernel (which aborts the run) cannot hide the established results.
  auto is_new = [](const std::string& name) {
    return name.size() >= 3 &&
           (name.compare(name.size() - 3, 3, "_v2") == 0 || name.compare(name.size() - 3, 3, "_v3") == 0);
  };
  for (int pass = 0; pass < 2; ++pass)
    for (const Check& c : registry()) {
      if (is_new(c.name) != (pass == 1)) continue;
      if (!opt.filter.empty() && c.name.find(opt.filter) == std::string::npos) continue;
      std::printf("== %s\n", c.name.c_str());
      std::fflush(stdout);
      const Clock::time_point group_start = Clock::now();
      std::mt19937_64 rng(opt.seed ^ std::hash<std::string>{}(c.name));
      c.run(opt, rng);
      sync_or_die(c.name.c_str());
      std::printf("== %s done in %.2f s\n", c.name.c_str(), seconds_since(group_start));
      ++ran;
    }
  const int failures = failures_so_far();
  std::printf("\n%d check groups run, %d failed checks: %s; wall time %.1f s\n", ran, failures,
              failures == 0 ? "PASS" : "FAIL", seconds_since(start));
  return failures == 0 ? 0 : 1;
}
